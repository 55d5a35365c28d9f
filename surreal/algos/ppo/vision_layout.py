"""Where the camera image and the proprioception sit in a flat camera-mode observation (no torch)."""

from __future__ import annotations

import numpy as np

from surreal.api.spaces import EnvInfo


def image_dim(image_size: int) -> int:
    """Entries of an RGB image of `image_size` x `image_size` in the flat observation."""
    return image_size * image_size * 3


def proprio_dim(env_info: EnvInfo, image_size: int) -> int:
    """Size of the proprioceptive part that follows the image in the flat observation.

    Raises:
        ValueError: the observation cannot hold such an image (camera mode is off, or the sizes
            disagree), with the settings that fix it.
    """
    total, pixels = int(np.prod(env_info.obs_shape)), image_dim(image_size)
    if total <= pixels:
        raise ValueError(
            f"algo.network=conv_lstm reads a {image_size}x{image_size} camera image, but the "
            f"observation has only {total} entries: put a camera key first in env.obs_keys "
            "(e.g. env.obs_keys=[agentview_image,robot0_proprio-state]) and make "
            "algo.image_size equal env.robosuite.camera_size"
        )
    return total - pixels


def split_obs(obs: np.ndarray, image_size: int) -> tuple[np.ndarray, np.ndarray]:
    """A flat observation [..., image + proprio] -> (image [..., H, W, 3] 0-255, proprio)."""
    pixels = image_dim(image_size)
    image = obs[..., :pixels].reshape(*obs.shape[:-1], image_size, image_size, 3)
    return image, obs[..., pixels:]
