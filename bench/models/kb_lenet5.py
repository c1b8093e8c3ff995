import torch
import torch.nn as nn


class Model(nn.Module):
    """LeNet-5 on a batch of 4096 32x32 grey images: small, it compiles and runs."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=5)
        self.conv2 = nn.Conv2d(6, 16, kernel_size=5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = x.view(x.size(0), -1)
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def get_inputs():
    return [torch.rand(4096, 1, 32, 32)]


def get_init_inputs():
    return [20]
