import torch
import torch.nn as nn
from einops import rearrange


class Model(nn.Module):
    """Splits an image into patches and projects each one (a ViT stem)."""

    def __init__(self, channels, patch, dim):
        super(Model, self).__init__()
        self.patch = patch
        self.proj = nn.Linear(channels * patch * patch, dim)

    def forward(self, images):
        patches = rearrange(images, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=self.patch, p2=self.patch)
        return self.proj(patches)


batch_size = 2
channels = 3
image_size = 16
patch = 4
dim = 32


def get_inputs():
    return [torch.randn(batch_size, channels, image_size, image_size)]


def get_init_inputs():
    return [channels, patch, dim]
