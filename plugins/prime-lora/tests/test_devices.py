"""Core assignment on CPU-only machines: vLLM and the trainer get separate cores."""

from __future__ import annotations

from prime_lora import devices


def test_cores_are_split_between_inference_and_trainer():
    assert devices.cpu_split([0, 1]) == ([0], [1])
    assert devices.cpu_split([0, 1, 2, 3, 4]) == ([0, 1], [2, 3, 4])
    assert devices.cpu_split([3]) == ([3], [3])


def test_part_envs_carry_the_cores(monkeypatch):
    monkeypatch.setattr(devices, "has_cuda", lambda: False)
    inference = devices.part_env([0], {}, cpus=[0, 1], part="inference")
    trainer = devices.part_env([0], {}, cpus=[2, 5], part="trainer")
    assert inference["VLLM_CPU_OMP_THREADS_BIND"] == "0-1" and "CUDA_VISIBLE_DEVICES" not in inference
    assert trainer[devices.TRAINER_CPUS_VAR] == "2,5" and trainer["OMP_NUM_THREADS"] == "2"
    assert devices.cpu_list([2, 5]) == "2,5" and devices.cpu_list([4]) == "4"


def test_gpu_machines_get_their_gpu_ids(monkeypatch):
    monkeypatch.setattr(devices, "has_cuda", lambda: True)
    env = devices.part_env([2, 3], {}, cpus=[0], part="trainer")
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and devices.TRAINER_CPUS_VAR not in env
