"""A feed-forward network with a sparse first layer: the model of DeepPerf (Ha & Zhang, ICSE'19).

Why this shape: of a system's many configuration options only a few drive its performance, and
they interact, nonlinearly. A deep ReLU network can represent the interactions; an L1 penalty
on the first layer's weights alone drives the weights of options that do not matter to zero,
so the network learns from few samples (DeepPerf's point: tens to hundreds of measurements)
without the penalty shrinking what the deeper layers build from the options that do matter.
Inputs are standardised and the target scaled, the loss is the mean squared error plus the
penalty, and training is full-batch Adam for a fixed number of epochs: at a few hundred rows
that is fast on one CPU thread and, with a seeded initialisation, deterministic.

DeepPerf picks the depth and the penalty on a held-out split; `search=True` does the same,
cheaply (depth first with the default penalty, then the penalty with that depth), before it
trains on all rows. The trained weights are kept as numpy arrays, so a fitted model pickles
without torch state and predicts with numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from stortune.models.base import TabularRegressor
from stortune.torch_threads import one_torch_thread

if TYPE_CHECKING:
    import torch

# The search's candidates: DeepPerf searches depth first, then the first layer's penalty.
SEARCH_LAYERS = (2, 3, 4)
SEARCH_L1 = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
# Fewer rows leave too small a held-out split to choose by: the defaults are kept.
SEARCH_MIN_ROWS = 20


def _scale(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation per column, a constant column's deviation taken as 1."""
    mean = values.mean(axis=0)
    std = values.std(axis=0)
    return mean, np.where(std > 1e-12, std, 1.0)


def _train(
    X: np.ndarray,
    y: np.ndarray,
    n_layers: int,
    n_neurons: int,
    l1: float,
    learning_rate: float,
    epochs: int,
    seed: int,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Weights and biases of each layer of a network trained on scaled X and y (numpy)."""
    import torch

    generator = torch.Generator().manual_seed(int(seed))
    sizes = [X.shape[1]] + [int(n_neurons)] * max(1, int(n_layers)) + [1]
    layers: list[torch.nn.Linear] = []
    # Building a layer draws its default initialisation from torch's global generator: seed a
    # fork of it, which leaves the caller's random state as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
            layer = torch.nn.Linear(fan_in, fan_out)
            # He initialisation for ReLU, from the local generator.
            torch.nn.init.kaiming_uniform_(layer.weight, nonlinearity="relu", generator=generator)
            torch.nn.init.zeros_(layer.bias)
            layers.append(layer)
    modules: list[torch.nn.Module] = []
    for layer in layers[:-1]:
        modules += [layer, torch.nn.ReLU()]
    net = torch.nn.Sequential(*modules, layers[-1])
    inputs = torch.as_tensor(X, dtype=torch.float32)
    target = torch.as_tensor(y, dtype=torch.float32).reshape(-1, 1)
    first = layers[0].weight
    optimizer = torch.optim.Adam(net.parameters(), lr=float(learning_rate))
    for _ in range(int(epochs)):
        optimizer.zero_grad()
        loss = torch.mean((net(inputs) - target) ** 2)
        if l1 > 0:
            loss = loss + float(l1) * first.abs().sum()
        loss.backward()
        optimizer.step()
    return [
        (layer.weight.detach().numpy().copy(), layer.bias.detach().numpy().copy())
        for layer in layers
    ]


def _forward(layers: list[tuple[np.ndarray, np.ndarray]], X: np.ndarray) -> np.ndarray:
    out = X
    for i, (weight, bias) in enumerate(layers):
        out = out @ weight.T.astype(float) + bias.astype(float)
        if i < len(layers) - 1:
            out = np.maximum(out, 0.0)
    return out[:, 0]


class NetworkModel(TabularRegressor):
    """DeepPerf's network: ReLU hidden layers, a linear output, L1 on the first layer only.

    * `n_layers`: hidden layers, each of `n_neurons` units.
    * `l1`: strength of the L1 penalty on the first layer's weights, added to the mean squared
      error of the standardised target (so it does not depend on the metric's unit).
    * `learning_rate`, `epochs`: full-batch Adam.
    * `random_state`: seeds the initialisation (and the search's split); a fit is deterministic.
    * `search`: pick `n_layers` from `SEARCH_LAYERS`, then `l1` from `SEARCH_L1`, by the error
      on a held-out quarter of the rows, and train on all rows with them (`n_layers_`, `l1_`);
      with fewer than `SEARCH_MIN_ROWS` rows the given values are kept.
    """

    def __init__(
        self,
        n_layers: int = 3,
        n_neurons: int = 128,
        l1: float = 0.01,
        learning_rate: float = 1e-3,
        epochs: int = 1000,
        random_state: int = 0,
        search: bool = False,
    ) -> None:
        self.n_layers = n_layers
        self.n_neurons = n_neurons
        self.l1 = l1
        self.learning_rate = learning_rate
        self.epochs = epochs
        self.random_state = random_state
        self.search = search

    def _fit_encoded(self, Z: np.ndarray, y: np.ndarray) -> None:
        self.x_mean_, self.x_scale_ = _scale(Z)
        y_mean, y_scale = _scale(y[:, None])
        self.y_mean_, self.y_scale_ = float(y_mean[0]), float(y_scale[0])
        X = (Z - self.x_mean_) / self.x_scale_
        target = (y - self.y_mean_) / self.y_scale_
        with one_torch_thread():
            self.n_layers_, self.l1_ = int(self.n_layers), float(self.l1)
            if self.search and len(y) >= SEARCH_MIN_ROWS:
                self.n_layers_, self.l1_ = self._search(X, target)
            self.layers_ = self._train(X, target, self.n_layers_, self.l1_)

    def _train(
        self, X: np.ndarray, y: np.ndarray, n_layers: int, l1: float
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        return _train(
            X,
            y,
            n_layers,
            self.n_neurons,
            l1,
            self.learning_rate,
            self.epochs,
            self.random_state,
        )

    def _search(self, X: np.ndarray, y: np.ndarray) -> tuple[int, float]:
        """DeepPerf's two-step search on a held-out quarter: depth, then the penalty."""
        order = np.random.default_rng(self.random_state).permutation(len(y))
        n_valid = max(2, len(y) // 4)
        valid, train = order[:n_valid], order[n_valid:]

        errors: dict[tuple[int, float], float] = {}

        def error(n_layers: int, l1: float) -> float:
            if (n_layers, l1) not in errors:
                layers = self._train(X[train], y[train], n_layers, l1)
                errors[n_layers, l1] = float(np.mean((_forward(layers, X[valid]) - y[valid]) ** 2))
            return errors[n_layers, l1]

        l1 = float(self.l1)
        n_layers = min(SEARCH_LAYERS, key=lambda n: error(n, l1))
        l1 = min(SEARCH_L1, key=lambda value: error(n_layers, value))
        return n_layers, l1

    def _predict_encoded(self, Z: np.ndarray) -> np.ndarray:
        X = (Z - self.x_mean_) / self.x_scale_
        return _forward(self.layers_, X) * self.y_scale_ + self.y_mean_
