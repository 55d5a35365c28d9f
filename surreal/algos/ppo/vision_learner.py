"""RecurrentPPOLearner: PPO on the conv+LSTM model with truncated BPTT over stored sub-trajectories."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from surreal.algos.ppo.config import VisionPPOConfig
from surreal.algos.ppo.learner import PPOLearner, _time_major
from surreal.algos.ppo.loss import gae, ppo_loss
from surreal.algos.ppo.vision_layout import proprio_dim, split_obs
from surreal.algos.ppo.vision_model import ConvLSTMActorCritic
from surreal.algos.ppo.vision_policy import VisionPolicy
from surreal.api.core import Batch, Learner
from surreal.api.normalizer import RunningNormalizer
from surreal.api.spaces import EnvInfo

SEQUENCE_KEYS = (
    "image",
    "proprio",
    "starts",
    "actions",
    "logprobs",
    "values",
    "advantages",
    "returns",
    "lstm_h",
    "lstm_c",
)


def chunk(x: torch.Tensor, length: int) -> torch.Tensor:
    """[T, B, ...] -> [length, (T // length) * B, ...]: cut each column into sub-trajectories."""
    steps, batch = x.shape[:2]
    parts = x.reshape(steps // length, length, batch, *x.shape[2:])
    return parts.transpose(0, 1).reshape(length, (steps // length) * batch, *x.shape[2:])


class RecurrentPPOLearner(PPOLearner):
    """PPO on the paper's conv+LSTM vision model: the algorithm `ppo-vision`.

    Each segment an actor sends is cut into sub-trajectories of `algo.bptt_length` steps; the LSTM
    restarts from the state the actor stored at the first step of each (the state travels with the
    experience as `lstm_h`/`lstm_c`), is zeroed where an episode starts, and the loss
    backpropagates through the whole sub-trajectory. Minibatches are sets of sub-trajectories.
    """

    config_class = VisionPPOConfig

    def __init__(self, config: VisionPPOConfig, env_info: EnvInfo) -> None:
        config.check(env_info)
        Learner.__init__(self, config, env_info)  # builds self.model with make_model
        self.optimizer = torch.optim.Adam(
            self.model.parameters(), lr=config.lr, eps=1e-5, fused=True if self._compiling else None
        )
        self._step = self.compiled(
            self._loss_backward, "ppo-vision's minibatch step", reset=self.optimizer.zero_grad
        )
        """The minibatch's loss and backward through the unrolled LSTM: `_loss_backward`,
        compiled with `run.compile=on` from the second batch on (the first is learned eagerly)."""
        size = proprio_dim(env_info, config.image_size)
        self.normalizer = RunningNormalizer((size,)) if config.norm_obs else None
        self.kl_coef = config.kl_coef
        self.iterations = 0

    @classmethod
    def check_config(cls, config: VisionPPOConfig, env_info: EnvInfo) -> None:
        """Raise ValueError if the observations hold no camera image of `algo.image_size`
        (`surreal launch` asks before anything starts: `surreal.api.core.check_settings`)."""
        proprio_dim(env_info, config.image_size)

    @classmethod
    def make_model(cls, config: VisionPPOConfig, env_info: EnvInfo) -> ConvLSTMActorCritic:
        """The conv+LSTM actor-critic (the same one `VisionPolicy` builds)."""
        return ConvLSTMActorCritic(
            env_info, config.image_size, config.lstm_size, config.hidden_sizes, config.activation
        )

    @classmethod
    def make_policy(cls, config: VisionPPOConfig, env_info: EnvInfo) -> VisionPolicy:
        return VisionPolicy(config, env_info)

    def sub_trajectories(self, batch: Batch) -> dict[str, torch.Tensor]:
        """The batch as sub-trajectories [bptt_length, n, ...] with GAE advantages and returns."""
        cfg = self.config
        steps = batch["reward"].shape[1]
        length = cfg.bptt_length or steps
        if steps % length:
            raise ValueError(f"algo.bptt_length={length} must divide actor.rollout_length={steps}")
        image, proprio = split_obs(_time_major(batch["obs"]), cfg.image_size)
        if self.normalizer is not None:
            proprio = self.normalizer(proprio)
        keys = ("reward", "value", "terminated", "truncated", "final_value", "action", "logprob")
        arrays = {k: _time_major(batch[k]) for k in (*keys, "lstm_h", "lstm_c")}
        arrays.update(image=image, proprio=proprio)
        arrays["next_value"] = np.asarray(batch["next_value"]).reshape(-1)
        t = self.to_device(arrays)  # one staging copy per array; zero-copy views on the CPU
        terminated, truncated = t["terminated"], t["truncated"]
        with torch.no_grad():
            advantages, returns = gae(
                t["reward"],
                t["value"],
                t["next_value"],
                terminated,
                truncated,
                t["final_value"],
                cfg.gamma,
                cfg.gae_lambda,
            )
        starts = torch.zeros_like(terminated)
        starts[1:] = terminated[:-1] | truncated[:-1]  # the actor reset its memory there
        seq = {
            "image": t["image"],
            "proprio": t["proprio"],
            "starts": starts,
            "actions": t["action"],
            "logprobs": t["logprob"],
            "values": t["value"],
            "advantages": advantages,
            "returns": returns,
            "lstm_h": t["lstm_h"],
            "lstm_c": t["lstm_c"],
        }
        return {k: chunk(seq[k], length) for k in SEQUENCE_KEYS}

    def learn(self, batch: Batch) -> dict[str, float]:
        cfg = self.config
        if cfg.anneal_lr:
            self.optimizer.param_groups[0]["lr"] = max(1.0 - self.progress, 0.0) * cfg.lr
        seq = self.sub_trajectories(batch)
        metrics = self._update(seq)
        if self.normalizer is not None:
            _, raw_proprio = split_obs(np.asarray(batch["obs"], np.float32), cfg.image_size)
            self.normalizer.update(self.gather(raw_proprio))
        self.iterations += 1
        return self._batch_metrics(metrics, seq["values"], seq["returns"])

    def _update(self, seq: dict[str, torch.Tensor]) -> dict[str, Any]:
        size = seq["image"].shape[1]
        # eager: run.compile off (`_step` is then the bound method itself), or the first batch
        # (`surreal launch`'s preflight check learns one batch in the launcher: no compiling there)
        if self._step == self._loss_backward or self.iterations == 0:
            return self._epochs(size, lambda mb: self._minibatch_loss(seq, mb))
        # compiled: tensors only (the KL coefficient 0-d, so adapting it compiles nothing)
        args = [seq[k] for k in SEQUENCE_KEYS]
        kl_coef = torch.tensor(float(self.kl_coef), device=self.device)
        return self._epochs(size, lambda mb: (None, self._step(*args, mb, kl_coef)))

    def _loss_backward(self, *args: torch.Tensor) -> dict[str, torch.Tensor]:
        """`_minibatch_loss` and its `backward()` for the compiled step: (the sequences of
        `SEQUENCE_KEYS` in order, mb, kl_coef) -> the loss's stats."""
        *seq, mb, kl_coef = args
        loss, stats = self._minibatch_loss(dict(zip(SEQUENCE_KEYS, seq, strict=True)), mb, kl_coef)
        loss.backward()
        return stats

    def _minibatch_loss(
        self, seq: dict[str, torch.Tensor], mb: torch.Tensor, kl_coef: Any = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The PPO loss on sub-trajectories `mb`, the LSTM unrolled through each of them (the KL
        coefficient: the learner's current one unless given)."""
        features, _, _ = self.model.unroll(
            seq["image"][:, mb],
            seq["proprio"][:, mb],
            (seq["lstm_h"][0, mb], seq["lstm_c"][0, mb]),
            seq["starts"][:, mb],
        )
        features = features.flatten(0, 1)
        flat = {
            k: seq[k][:, mb].flatten(0, 1)
            for k in ("actions", "logprobs", "values", "advantages", "returns")
        }
        dist = self.model.distribution(features)
        return ppo_loss(
            self.model.log_prob(dist, flat["actions"]),
            flat["logprobs"],
            flat["advantages"],
            self.model.value(features),
            flat["values"],
            flat["returns"],
            self.model.entropy(dist),
            self.config,
            self.kl_coef if kl_coef is None else kl_coef,
        )
