"""Registers the ops of the old extension (left half-merged: this file does not parse)."""

import torch

lib = torch.library.Library("legacy", "DEF")
<<<<<<< HEAD
lib.define("scale(Tensor x, float factor) -> Tensor")
=======
lib.define("scale(Tensor x, float factor=1.0) -> Tensor")
>>>>>>> feature/default-factor
