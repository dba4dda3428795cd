"""The shipped alert and recording rules: ``promtool check rules`` and ``promtool test rules``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
ALERTS = REPO / "otel-config" / "alerts"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("promtool") is None:
        pytest.skip("promtool not installed (apt-get install prometheus; .ci/run does)")
    return subprocess.run(["promtool", *args], capture_output=True, text=True, cwd=ALERTS,
                          timeout=60, check=False)


def test_rules_are_valid() -> None:
    result = _promtool("check", "rules", "gpu-alerts.rules.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 18 rules found" in result.stdout


def test_rule_unit_tests_pass() -> None:
    result = _promtool("test", "rules", "gpu-alerts.test.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_a_broken_expectation_fails(tmp_path: Path) -> None:
    """The unit tests can fail: the same file with one expectation changed does."""
    (tmp_path / "gpu-alerts.rules.yaml").write_text(
        (ALERTS / "gpu-alerts.rules.yaml").read_text(), encoding="utf-8")
    broken = (ALERTS / "gpu-alerts.test.yaml").read_text().replace(
        'gpu_xid_code: "79"', 'gpu_xid_code: "13"', 1)
    (tmp_path / "t.yaml").write_text(broken, encoding="utf-8")
    if shutil.which("promtool") is None:
        pytest.skip("promtool not installed")
    result = subprocess.run(["promtool", "test", "rules", "t.yaml"], capture_output=True,
                            text=True, cwd=tmp_path, timeout=60, check=False)
    assert result.returncode != 0
    assert 'gpu_xid_code="13"' in result.stdout + result.stderr


def _pods_dashboard_queries() -> dict[str, str]:
    """Every query of the pods dashboard as Grafana sends it with every variable on "All"
    (each variable's allValue)."""
    import json

    board = json.loads((REPO / "otel-config" / "dashboards" / "gpu-pods.json").read_text())
    all_values = {f"${v['name']}": v["allValue"] for v in board["templating"]["list"]
                  if v.get("includeAll")}
    queries = {}

    def walk(panels: list[dict[str, object]]) -> None:
        for panel in panels:
            for i, target in enumerate(panel.get("targets", [])):  # type: ignore[arg-type]
                expr = target["expr"]
                for name, value in all_values.items():
                    expr = expr.replace(name, value)
                queries[f"{panel['title']} #{i}"] = expr
            walk(panel.get("panels", []))  # type: ignore[arg-type]

    walk(board["panels"])
    return queries


def test_the_pods_dashboard_shows_only_pods(tmp_path: Path) -> None:
    """A container outside any pod (docker, a bare cgroup) on a GPU beside pod ml/a: every
    panel of the pods dashboard, evaluated by Prometheus' engine (promtool) with the
    variables on "All", shows pod ml/a alone -- no label-less "no pod" series, and the
    GPU counted as held by one pod."""
    import yaml

    pod = 'hw_id="GPU-0",k8s_namespace_name="ml",k8s_pod_name="a"'
    series = {
        f'gpu_container_utilization_ratio{{{pod},hw_gpu_task="general"}}': "0.02",
        'gpu_container_utilization_ratio{hw_id="GPU-0",container_id="c0ffee",'
        'hw_gpu_task="general"}': "0.5",
        f"gpu_container_memory_usage_bytes{{{pod}}}": "3000",
        'gpu_container_memory_usage_bytes{hw_id="GPU-0",container_id="c0ffee"}': "1000",
        f"gpu_container_memory_limit_bytes{{{pod}}}": "6000",
        'gpu_container_memory_limit_bytes{hw_id="GPU-0",container_id="c0ffee"}': "2000",
        f'gpu_process_memory_usage_bytes{{{pod},process_pid="7"}}': "3000",
        'gpu_process_memory_usage_bytes{hw_id="GPU-0",container_id="c0ffee",process_pid="8"}':
            "1000",
        f'gpu_process_utilization_ratio{{{pod},process_pid="7",hw_gpu_task="general"}}': "0.02",
        'gpu_process_utilization_ratio{hw_id="GPU-0",container_id="c0ffee",process_pid="8",'
        'hw_gpu_task="general"}': "0.5",
    }
    labels = 'k8s_namespace_name="ml",k8s_pod_name="a"'
    expected = {
        "GPU utilization per pod #0": [(f"{{{labels}}}", 0.02)],
        "GPU memory per pod #0": [(f"{{{labels}}}", 3000)],
        "Memory used of the pod's allocated share #0": [(f"{{{labels}}}", 0.5)],
        "Pods per GPU #0": [('{hw_id="GPU-0"}', 1)],
        "Idle pods holding GPU memory #0": [(f'{{{labels},hw_id="GPU-0"}}', 3000)],
        "Processes #0": [(f'gpu_process_memory_usage_bytes{{{pod},process_pid="7"}}', 3000)],
        "Processes #1": [(f'gpu_process_utilization_ratio{{{pod},process_pid="7",'
                          'hw_gpu_task="general"}', 0.02)],
    }
    queries = _pods_dashboard_queries()
    assert set(queries) == set(expected)  # a new panel gets its expectation here
    (tmp_path / "empty.rules.yaml").write_text("groups: []\n", encoding="utf-8")
    test = {"rule_files": ["empty.rules.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [{"series": s, "values": f"{v} {v} {v}"} for s, v in series.items()],
        "promql_expr_test": [
            {"expr": queries[name], "eval_time": "1m",
             "exp_samples": [{"labels": labels_, "value": value}
                             for labels_, value in samples]}
            for name, samples in expected.items()],
    }]}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(test), encoding="utf-8")
    if shutil.which("promtool") is None:
        pytest.skip("promtool not installed")
    result = subprocess.run(["promtool", "test", "rules", "t.yaml"], capture_output=True,
                            text=True, cwd=tmp_path, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("values", ["prometheus-adapter-values.yaml",
                                    "prometheus-adapter-values-dcgm-4.9.yaml"])
def test_the_adapter_ratio_keeps_same_named_pods_of_two_namespaces_apart(
        tmp_path: Path, values: str) -> None:
    """The Prometheus Adapter's memory-ratio rule as the adapter expands it for pod `infer`
    in namespace team-a (LabelMatchers on both resource labels, grouped by pod), evaluated by
    Prometheus' engine: team-a's use over team-a's allocation, not over both namespaces'."""
    import yaml

    adapter = yaml.safe_load((REPO / "helm" / "examples" / values).read_text(encoding="utf-8"))
    (rule,) = [r for r in adapter["rules"]["custom"] if "name" in r
               and r["name"]["as"].endswith("_GPU_MEM_USED_RATIO")]
    expr = (rule["metricsQuery"].replace("<<.Series>>", "DCGM_CUSTOM_PROCESS_MEM_USED")
            .replace("<<.LabelMatchers>>", 'NamespaceName="team-a",PodName=~"infer"')
            .replace("<<.GroupBy>>", "PodName"))
    series = {}
    for namespace, used, allocated in (("team-a", 1000, 8192), ("team-b", 3000, 4096)):
        labels = f'NamespaceName="{namespace}",PodName="infer",ContainerName="server"'
        series[f'DCGM_CUSTOM_PROCESS_MEM_USED{{{labels},ProcessId="1"}}'] = used
        series[f"DCGM_CUSTOM_CONTAINER_MEM_ALLOCATED{{{labels}}}"] = allocated
    (tmp_path / "empty.rules.yaml").write_text("groups: []\n", encoding="utf-8")
    test = {"rule_files": ["empty.rules.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [{"series": s, "values": f"{v} {v}"} for s, v in series.items()],
        "promql_expr_test": [{"expr": expr, "eval_time": "1m", "exp_samples": [
            {"labels": '{PodName="infer"}', "value": 1000 / 8192}]}],
    }]}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(test), encoding="utf-8")
    if shutil.which("promtool") is None:
        pytest.skip("promtool not installed")
    result = subprocess.run(["promtool", "test", "rules", "t.yaml"], capture_output=True,
                            text=True, cwd=tmp_path, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
