"""Synthetic data for the real-code harness (bench/realcode.py): nothing is downloaded.

Each real training script runs through a small driver the harness writes:

    import synthetic
    synthetic.run(SCRIPT, ARGV, setups=["torchvision", ...], size=N)

A setup replaces what the script would download with random data of the same shape and type,
keeping the library's own code paths: the torchvision datasets keep their real ``__getitem__``
(uint8 arrays → PIL image → the script's transforms), only ``__init__`` fills the arrays instead
of reading files. Then the script runs as ``python SCRIPT ARGV`` would (``__main__``, its folder
first on ``sys.path``).
"""

import os
import runpy
import sys

SIZE = 256  # samples per synthetic training set (test sets: half)


def _rng():
    import numpy as np

    return np.random.default_rng(0)


def torchvision(size):
    """MNIST-family, CIFAR-10/100 and Caltech101 built from random arrays, never downloaded."""
    import numpy as np
    import PIL.Image
    import torch
    import torchvision.datasets as D

    rng = _rng()

    def n_for(train):
        return size if train else max(size // 2, 8)

    def mnist_like(cls, classes, split=False):
        class Synthetic(cls):
            def __init__(self, root, *args, **kw):
                if split:  # EMNIST(root, split, **kwargs)
                    self.split = args[0] if args else kw.pop("split")
                    args = args[1:]
                names = ("train", "transform", "target_transform", "download")
                kw.update(zip(names, args))
                D.VisionDataset.__init__(self, root, transform=kw.get("transform"),
                                         target_transform=kw.get("target_transform"))
                self.train = kw.get("train", True)
                n = n_for(self.train)
                self.data = torch.from_numpy(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
                self.targets = torch.from_numpy(rng.integers(0, classes, n)).long()

        Synthetic.__name__ = Synthetic.__qualname__ = cls.__name__
        return Synthetic

    def cifar_like(cls, classes):
        class Synthetic(cls):
            def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
                D.VisionDataset.__init__(self, root, transform=transform, target_transform=target_transform)
                self.train = train
                n = n_for(train)
                self.data = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
                self.targets = [int(t) for t in rng.integers(0, classes, n)]
                self.classes = ["class%d" % i for i in range(classes)]
                self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

        Synthetic.__name__ = Synthetic.__qualname__ = cls.__name__
        return Synthetic

    class Caltech101(D.Caltech101):
        """Random RGB images of Caltech101's typical size (about 300 × 200), label 0."""

        def __init__(self, root, target_type="category", transform=None, target_transform=None, download=False):
            D.VisionDataset.__init__(self, root, transform=transform, target_transform=target_transform)
            self.target_type = [target_type] if isinstance(target_type, str) else target_type
            self.y = [int(t) for t in rng.integers(0, 101, size)]
            self.index = list(range(size))

        def __getitem__(self, i):
            img = PIL.Image.fromarray(rng.integers(0, 256, (200, 300, 3), dtype=np.uint8))
            target = self.y[i]
            if self.transform is not None:
                img = self.transform(img)
            if self.target_transform is not None:
                target = self.target_transform(target)
            return img, target

        def __len__(self):
            return len(self.y)

    replacements = {
        "MNIST": mnist_like(D.MNIST, 10),
        "FashionMNIST": mnist_like(D.FashionMNIST, 10),
        "KMNIST": mnist_like(D.KMNIST, 10),
        "EMNIST": mnist_like(D.EMNIST, 47, split=True),
        "CIFAR10": cifar_like(D.CIFAR10, 10),
        "CIFAR100": cifar_like(D.CIFAR100, 100),
        "Caltech101": Caltech101,
    }
    # Scripts import them as torchvision.datasets.X, torchvision.datasets.mnist.X, ...cifar.X.
    import torchvision.datasets.caltech as caltech
    import torchvision.datasets.cifar as cifar
    import torchvision.datasets.mnist as mnist

    for name, cls in replacements.items():
        for module in (D, mnist, cifar, caltech):
            if hasattr(module, name):
                setattr(module, name, cls)


def nanogpt_data(size, dataset="synthetic", vocab=50257, tokens=65536):
    """nanoGPT's data/<dataset>/{train,val}.bin (uint16 token ids) in the working folder."""
    import numpy as np

    folder = os.path.join("data", dataset)
    os.makedirs(folder, exist_ok=True)
    rng = _rng()
    for split, n in (("train", tokens), ("val", tokens // 4)):
        rng.integers(0, vocab, n, dtype=np.uint16).tofile(os.path.join(folder, split + ".bin"))


def names_data(size, root="data/names"):
    """The char-RNN "names" dataset (one <language>.txt of names per line), random names."""
    rng = _rng()
    os.makedirs(root, exist_ok=True)
    letters = "abcdefghijklmnopqrstuvwxyz"
    for lang in ("English", "French", "German", "Italian"):
        with open(os.path.join(root, lang + ".txt"), "w") as f:
            for _ in range(size // 4):
                n = int(rng.integers(3, 10))
                f.write("".join(letters[int(i)] for i in rng.integers(0, 26, n)).capitalize() + "\n")


def sophia_module(size):
    """sophia-opt's examples import ``sophia``, the module its sdist ships as
    ``src/sophia_opt/__init__.py`` (the GitHub repository's ``sophia.py``): make that importable."""
    import importlib.util

    path = os.path.join(os.getcwd(), "src", "sophia_opt", "__init__.py")
    spec = importlib.util.spec_from_file_location("sophia", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["sophia"] = module
    spec.loader.exec_module(module)


SETUPS = {"torchvision": torchvision, "nanogpt_data": nanogpt_data, "names_data": names_data,
          "sophia_module": sophia_module}


def run(script, argv, setups=(), size=SIZE):
    for name in setups:
        SETUPS[name](size)
    script = os.path.abspath(script)
    sys.argv = [script] + list(argv)
    sys.path[0] = os.path.dirname(script)
    runpy.run_path(script, run_name="__main__")
