"""PPOLearner: GAE over the actors' segments, then epochs of minibatch updates."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from surreal.algos.ppo.config import PPOConfig
from surreal.algos.ppo.loss import adapt_kl_coef, gae, ppo_loss
from surreal.algos.ppo.networks import entropy, log_prob, make_model
from surreal.algos.ppo.policy import PPOPolicy, model_params
from surreal.api.core import Batch, Learner, Params
from surreal.api.normalizer import RunningNormalizer
from surreal.api.spaces import EnvInfo

MinibatchLoss = Callable[[torch.Tensor], tuple[torch.Tensor | None, dict[str, torch.Tensor]]]
"""indices -> (loss, stats); loss None: the step ran `backward()` itself (the compiled step)."""


def explained_variance(y_pred: np.ndarray, y_true: np.ndarray) -> float:
    """1 - Var(y_true - y_pred) / Var(y_true); NaN when y_true is constant."""
    var_y = np.var(y_true)
    return float("nan") if var_y == 0 else float(1 - np.var(y_true - y_pred) / var_y)


def _time_major(x: np.ndarray) -> np.ndarray:
    """[segments, T, envs, ...] -> [T, segments * envs, ...] (one copy)."""
    s, t, n = x.shape[:3]
    return np.ascontiguousarray(np.swapaxes(x, 0, 1)).reshape(t, s * n, *x.shape[3:])


class PPOLearner(Learner):
    """Proximal Policy Optimization with GAE, advantage and observation normalization."""

    config_class = PPOConfig

    def __init__(self, config: PPOConfig, env_info: EnvInfo) -> None:
        config.check(env_info)
        super().__init__(config, env_info)  # builds self.model with make_model
        # fused Adam when compiled or on a GPU: one kernel, its step counts on the device (the
        # default Adam reads each back per step; eager on the CPU keeps it, as it always had)
        fused = True if self._compiling or self.device.type == "cuda" else None
        self.optimizer = torch.optim.Adam(
            self.model.parameters(), lr=config.lr, eps=1e-5, fused=fused
        )
        self._step = self.compiled(
            self._loss_backward, "PPO's minibatch step", reset=self.optimizer.zero_grad
        )
        """The minibatch's loss and backward: `_loss_backward`, compiled with `run.compile` from
        the second batch on (the first is learned eagerly)."""
        self.normalizer = RunningNormalizer(env_info.obs_shape) if config.norm_obs else None
        self.kl_coef = config.kl_coef
        self.clip_coef = config.clip_coef  # annealed in learn() with algo.anneal_clip
        self.iterations = 0

    @classmethod
    def make_model(cls, config: PPOConfig, env_info: EnvInfo) -> torch.nn.Module:
        """`algo.model` or the MLP actor-critic (`surreal.algos.ppo.networks.make_model`)."""
        return make_model(config, env_info)

    @classmethod
    def make_policy(cls, config: PPOConfig, env_info: EnvInfo) -> PPOPolicy:
        return PPOPolicy(config, env_info)

    def learn(self, batch: Batch) -> dict[str, float]:
        cfg = self.config
        if cfg.anneal_lr:
            self.optimizer.param_groups[0]["lr"] = max(1.0 - self.progress, 0.0) * cfg.lr
        self.clip_coef = cfg.clip_coef * (max(1.0 - self.progress, 0.0) if cfg.anneal_clip else 1.0)
        keys = ("obs", "reward", "value", "terminated", "truncated", "final_value", "action")
        arrays = {k: _time_major(batch[k]) for k in (*keys, "logprob")}
        raw_obs = arrays["obs"]
        if self.normalizer is not None:
            arrays["obs"] = self.normalizer(raw_obs)
        arrays["next_value"] = np.asarray(batch["next_value"]).reshape(-1)
        t = self.to_device(arrays)  # one staging copy per array; zero-copy views on the CPU
        with torch.no_grad():
            advantages, returns = gae(
                t["reward"],
                t["value"],
                t["next_value"],
                t["terminated"],
                t["truncated"],
                t["final_value"],
                cfg.gamma,
                cfg.gae_lambda,
            )
        flat = {
            "obs": t["obs"].flatten(0, 1),
            "actions": t["action"].flatten(0, 1),
            "logprobs": t["logprob"].flatten(0, 1),
            "values": t["value"].flatten(0, 1),
            "advantages": advantages.flatten(),
            "returns": returns.flatten(),
        }
        stats = self._update(flat)
        if self.normalizer is not None:
            self.normalizer.update(self.gather(raw_obs))  # every replica's share
        self.iterations += 1
        return self._batch_metrics(stats, flat["values"], flat["returns"])

    def _batch_metrics(
        self, stats: dict[str, torch.Tensor], values: torch.Tensor, returns: torch.Tensor
    ) -> dict[str, float]:
        """The batch's metrics as floats (one read from the device), with the KL penalty's
        coefficient adapted after the passes (algo.loss=kl)."""
        epochs = stats.pop("losses/epochs", None)
        if not stats:  # update_epochs=0 (bench/actor_scaling.py switches learning off)
            return {"losses/epochs": 0.0}
        metrics = self._value_metrics(stats, values, returns)
        metrics["losses/approx_kl"] = self._replica_mean(metrics["losses/approx_kl"])
        if self.config.loss == "kl":
            self.kl_coef = adapt_kl_coef(
                self.kl_coef, metrics["losses/approx_kl"], self.config.target_kl or 0.01
            )
            metrics["losses/kl_coef"] = self.kl_coef
        metrics["losses/epochs"] = float(epochs)
        return metrics

    def _value_metrics(
        self, stats: dict[str, torch.Tensor], values: torch.Tensor, returns: torch.Tensor
    ) -> dict[str, float]:
        """The batch's `stats` (tensors on the device), its value head's explained variance and
        the current learning rate as floats: the one read back to the host per batch."""
        var_y = returns.var(correction=0)
        stats["losses/explained_variance"] = torch.where(
            var_y == 0, torch.nan, 1 - (returns - values).var(correction=0) / var_y
        )
        names = list(stats)
        read = torch.stack([stats[k].float().reshape(()) for k in names]).tolist()
        metrics = dict(zip(names, read, strict=True))
        metrics["charts/learning_rate"] = float(self.optimizer.param_groups[0]["lr"])
        return metrics

    def _update(self, b: dict[str, torch.Tensor]) -> dict[str, Any]:
        size = b["obs"].shape[0]
        # eager: run.compile off (`_step` is then the bound method itself), or the first batch
        # (`surreal launch`'s preflight check learns one batch in the launcher: no compiling there)
        if self._step == self._loss_backward or self.iterations == 0:
            return self._epochs(size, lambda mb: self._minibatch_loss(b, mb))
        # compiled: tensors only (0-d for the coefficients, so annealing them compiles nothing)
        args = [b[k] for k in ("obs", "actions", "logprobs", "advantages", "values", "returns")]
        coefs = [torch.tensor(float(c), device=self.device) for c in (self.clip_coef, self.kl_coef)]
        return self._epochs(size, lambda mb: (None, self._step(*args, mb, *coefs)))

    def _loss_backward(self, *args: torch.Tensor) -> dict[str, torch.Tensor]:
        """`_minibatch_loss` and its `backward()` for the compiled step: (obs, actions, logprobs,
        advantages, values, returns, mb, clip_coef, kl_coef) -> the loss's stats."""
        *flat, mb, clip_coef, kl_coef = args
        names = ("obs", "actions", "logprobs", "advantages", "values", "returns")
        loss, stats = self._minibatch_loss(
            dict(zip(names, flat, strict=True)), mb, clip_coef, kl_coef
        )
        loss.backward()
        return stats

    def _minibatch_loss(
        self,
        b: dict[str, torch.Tensor],
        mb: torch.Tensor,
        clip_coef: Any = None,
        kl_coef: Any = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The PPO loss and its stats on the flat samples `mb` of `b` (the coefficients: the
        learner's current ones unless given)."""
        dist = self.model.distribution(b["obs"][mb])
        newlogprob = log_prob(dist, b["actions"][mb])
        return ppo_loss(
            newlogprob,
            b["logprobs"][mb],
            b["advantages"][mb],
            self.model.value(b["obs"][mb]),
            b["values"][mb],
            b["returns"][mb],
            entropy(dist),
            self.config,
            self.kl_coef if kl_coef is None else kl_coef,
            self.clip_coef if clip_coef is None else clip_coef,
        )

    def _epochs(self, size: int, minibatch_loss: MinibatchLoss) -> dict[str, Any]:
        """`update_epochs` passes over `size` shuffled samples in minibatches of `minibatch_size`
        (0: `num_minibatches` of them); returns the last minibatch's stats, still tensors on the
        device, and `losses/epochs` (the passes made).

        Each minibatch (a tensor of indices) gets `minibatch_loss` (loss None: it ran `backward()`
        itself, the compiled step), a clipped-gradient Adam step. Nothing inside the minibatch
        loop reads a value back to the host (a GPU runs ahead of Python); with the clip loss and
        `target_kl`, the passes stop early once the last approx KL exceeds it: one read per pass.
        """
        cfg = self.config
        minibatch_size = min(cfg.minibatch_size, size) or max(size // cfg.num_minibatches, 1)
        stats: dict[str, Any] = {}
        epochs = 0
        for _ in range(cfg.update_epochs):
            epochs += 1
            perm = torch.randperm(size, device=self.device)  # shuffled on the device
            for start in range(0, size, minibatch_size):
                self.optimizer.zero_grad()
                loss, stats = minibatch_loss(perm[start : start + minibatch_size])
                if loss is not None:
                    loss.backward()
                self.sync_gradients()  # mean over learner replicas (run.learner_replicas)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
            if cfg.target_kl is not None and cfg.loss == "clip":
                if self._replica_mean(stats["losses/approx_kl"]) > cfg.target_kl:
                    break  # early stop on KL (every replica decides alike)
        return {**stats, "losses/epochs": epochs}

    def _replica_mean(self, value: Any) -> float:
        """`value` averaged over the learner replicas (itself for one learner)."""
        if self.replicas is None:
            return float(value)
        return self.replicas.sum(float(value)) / self.replicas.world

    def params(self) -> Params:
        params = model_params(self.model)
        if self.normalizer is not None:
            params.update(self.normalizer.to_params())
        return params

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "normalizer": self.normalizer.to_params() if self.normalizer else None,
            "kl_coef": self.kl_coef,
            "iterations": self.iterations,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.normalizer is not None and state.get("normalizer") is not None:
            self.normalizer.load_params(state["normalizer"])
        self.kl_coef = float(state["kl_coef"])
        self.iterations = int(state["iterations"])
