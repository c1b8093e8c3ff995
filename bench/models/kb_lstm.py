import torch
import torch.nn as nn


class Model(nn.Module):
    """A 6-layer LSTM over 512 steps of a batch of 10, then a linear head on the last step."""

    def __init__(self, input_size, hidden_size, num_layers, output_size):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[:, -1, :])


def get_inputs():
    return [torch.rand(10, 512, 128)]


def get_init_inputs():
    return [128, 256, 6, 10]
