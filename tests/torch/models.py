"""The models the PyTorch tests watch: real architectures (random weights, no downloads) and small ones that
each stress one thing (shared weights, an in-place ReLU, a GPT written in plain PyTorch)."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ._torchvision import torchvision_models


class TinyGPT(nn.Module):
    """A two-block GPT: token and position embeddings, causal self-attention written out (no fused kernel),
    a GELU MLP, pre-norm residuals, and an output head tied to the token embedding (shared weights)."""

    def __init__(self, vocab: int = 11, dim: int = 8, heads: int = 2, blocks: int = 2, context: int = 6) -> None:
        super().__init__()
        self.heads = heads
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(blocks))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Shared(nn.Module):
    """One Linear applied twice: its weight gets the sum of two gradient contributions."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.lin(torch.tanh(self.lin(x)))))


class LSTMNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(3, 5, num_layers=2, batch_first=True)
        self.head = nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.enc(x).mean(dim=1))


def inplace_relu() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 6), nn.ReLU(inplace=True), nn.Linear(6, 2), nn.ReLU(inplace=True))


def resnet18() -> nn.Module:
    return torchvision_models().resnet18(num_classes=5)


#: name -> (model factory, input factory, dtype, loss from output): each test builds a fresh one
def cases() -> dict:
    g = torch.Generator().manual_seed(0)
    return {
        "resnet18": (resnet18, lambda: torch.randn(2, 3, 32, 32, generator=g), torch.float32,
                     lambda out: F.cross_entropy(out, torch.tensor([1, 3]))),
        "transformer_encoder": (Encoder, lambda: torch.randn(2, 5, 8, generator=g), torch.float64,
                                lambda out: F.cross_entropy(out, torch.tensor([0, 2]))),
        "lstm": (LSTMNet, lambda: torch.randn(2, 4, 3, generator=g), torch.float64, lambda out: (out ** 2).mean()),
        "tiny_gpt": (TinyGPT, lambda: torch.randint(0, 11, (2, 6), generator=g), torch.float64,
                     lambda out: F.cross_entropy(out.flatten(0, 1), torch.arange(12) % 11)),
        "shared_weights": (Shared, lambda: torch.randn(3, 4, generator=g), torch.float64,
                           lambda out: out.square().sum()),
        "inplace_relu": (inplace_relu, lambda: torch.randn(3, 4, generator=g), torch.float64,
                         lambda out: out.sum()),
    }
