"""PyTorch's `torch.utils` spellings: `rtxviz.utils.data` is `rtxviz.data`, `rtxviz.utils.checkpoint` is the
engine's checkpointing, so ``from rtxviz.utils.data import DataLoader, random_split`` works as a PyTorch user types
it. Nothing lives here: each module re-exports the objects themselves.

>>> from rtxviz.utils.data import DataLoader
>>> import rtxviz.data
>>> DataLoader is rtxviz.data.DataLoader
True
"""
