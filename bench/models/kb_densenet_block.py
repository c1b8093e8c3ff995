import torch
import torch.nn as nn


class Model(nn.Module):
    """A DenseNet dense block: each layer sees every earlier layer's features (torch.cat), with
    BatchNorm in training mode as a freshly built module is."""

    def __init__(self, num_layers: int, num_input_features: int, growth_rate: int):
        super().__init__()
        self.layers = nn.ModuleList([
            nn.Sequential(nn.BatchNorm2d(num_input_features + i * growth_rate), nn.ReLU(inplace=True),
                          nn.Conv2d(num_input_features + i * growth_rate, growth_rate, 3, padding=1, bias=False))
            for i in range(num_layers)])

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            features.append(layer(torch.cat(features, 1)))
        return torch.cat(features, 1)


def get_inputs():
    return [torch.randn(8, 32, 32, 32)]


def get_init_inputs():
    return [4, 32, 16]
