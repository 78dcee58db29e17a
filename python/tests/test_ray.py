"""Whole jobs on a local Ray cluster (2 CPUs): the same document as `tracehound analyze DIR`,
on the shipped 2-rank jobs, the shared 8-rank job and a 64-rank job from the scale generator
(`tracehound-dev scale`) with a planted straggler."""

import pytest

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'tracehound[ray]'")

import tracehound
import tracehound.ray
from conftest import OWN, cli_json, shared


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.parametrize("job", ["h200_ddp_straggler", "h200_ddp_exposed"])
def test_shipped_jobs(cluster, cli, job):
    d = OWN / "kineto-jobs" / job
    expected = cli_json(cli, "analyze", d)
    assert tracehound.ray.analyze_job(str(d)) == expected
    # However many threads a task runs, the result is the same.
    assert tracehound.ray.analyze_job(str(d), cpus_per_task=2) == expected


def test_eight_rank_job(cluster, cli):
    d = shared("kineto-jobs/dlrm_v100_8ranks")
    doc = tracehound.ray.analyze_job(str(d))
    assert doc == cli_json(cli, "analyze", d)
    assert len(doc["job"]["ranks"]) == 8


def test_sixty_four_rank_job(cluster, cli, dev, tmp_path):
    job = tmp_path / "job64"
    code, _, err = dev(
        "scale",
        OWN / "kineto-jobs" / "h200_ddp_exposed" / "rank0.pt.trace.json.gz",
        job,
        "--size-mb", "1", "--ranks", "64", "--gzip", "--late-rank", "37", "--late-ms", "2",
    )
    assert code == 0, err
    doc = tracehound.ray.analyze_job(str(job))
    assert doc == cli_json(cli, "analyze", job)
    assert [r["rank"] for r in doc["job"]["ranks"]] == list(range(64))
    # The planted straggler (late at every all-reduce) is named among the 64 ranks.
    first = doc["job"]["findings"][0]
    assert first["rule"] == "straggler_rank"
    assert first["metrics"]["straggler_rank"] == 37
    # A glob names the job by the directory holding its files, as analyze DIR does.
    assert tracehound.ray.analyze_job(str(job / "rank*.pt.trace.json.gz")) == doc


def test_a_failed_rank_fails_the_job_with_its_message(cluster, cli):
    # A rank refused on its worker (over the memory limit) fails the job with the CLI's
    # message, raised on the driver as the package's own exception.
    d = OWN / "kineto-jobs" / "h200_ddp_straggler"
    code, _, err = cli("--max-memory", "1K", "analyze", d)
    assert code == 2
    messages = [line.removeprefix("tracehound: error: ") for line in err.strip().splitlines()]
    assert len(messages) == 2
    with pytest.raises(tracehound.TracehoundError) as e:
        tracehound.ray.analyze_job(str(d), max_memory="1K")
    assert str(e.value).splitlines() == messages


def test_files_that_are_not_traces_are_skipped_with_a_warning(cluster, tmp_path):
    (tmp_path / "truth.json").write_text('{"planted": []}')
    with pytest.warns(UserWarning, match="skipped .*truth.json"):
        with pytest.raises(tracehound.TracehoundError, match="no Kineto or Nsight Systems traces"):
            tracehound.ray.analyze_job(str(tmp_path))
