"""Launches the job does not understand are refused (exit 2, one line), never guessed.

Each case ran with exit 0 before and did something else than asked: independent jobs writing
the same files (srun without --mpi, --backend threads under mpiexec), a world of one machine
(--backend mpi without a launcher), --machines ignored under mpiexec, a "grid" that was a path,
and output directories created from a typo.
"""

from __future__ import annotations

import json

import networkx as nx
import pytest

from dpnet.cli import parse_config
from dpnet.run import world_size_error
from tests.launch import job_lines, run_job

QUICK = ["--n-samples", "200", "--n-test", "50", "--quiet"]


def _refused(done, message: str) -> None:
    lines = job_lines(done.stderr)
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("dpnet: error: ") and message in lines[0]
    assert done.stdout == ""


def test_backend_mpi_without_a_launcher_is_refused():
    _refused(run_job([*QUICK, "--backend", "mpi"], timeout=60), "not started by mpiexec")


def test_srun_tasks_without_an_mpi_world_are_refused():
    """What srun -n 5 without --mpi gives each task: Slurm's variables, no PMI rank."""
    env = {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "5", "SLURM_NTASKS": "5"}
    _refused(run_job(QUICK, timeout=60, env=env), "srun started 5 tasks")
    one_task = {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "1", "SLURM_NTASKS": "1"}
    assert run_job(QUICK, timeout=60, env=one_task).returncode == 0  # threads, as documented


@pytest.mark.mpi_launch
def test_machines_that_disagree_with_the_mpi_world_are_refused():
    _refused(run_job([*QUICK, "--machines", "8"], n_ranks=3, timeout=60), "mpiexec started 3")
    assert run_job([*QUICK, "--machines", "3"], n_ranks=3, timeout=60).returncode == 0


@pytest.mark.mpi_launch
def test_backend_inprocess_in_several_mpi_ranks_is_refused():
    done = run_job([*QUICK, "--backend", "threads"], n_ranks=2, timeout=60)
    _refused(done, "--backend threads under a launcher that started 2 ranks")


def test_a_launcher_and_an_mpi_world_of_other_sizes_are_refused():
    """mpiexec of one MPI, mpi4py built against another: every rank a world of one."""
    config = parse_config([])
    message = world_size_error(config, 1, {"OMPI_COMM_WORLD_SIZE": "5"})
    assert message is not None and "started 5 ranks but this MPI world has 1" in message
    assert world_size_error(config, 5, {"PMI_SIZE": "5"}) is None
    assert world_size_error(config, 5, {}) is None


def test_an_output_directory_that_does_not_exist_is_refused_not_created(tmp_path):
    target = tmp_path / "no" / "such" / "r.json"
    _refused(run_job([*QUICK, "--output", str(target)], timeout=60), "does not exist")
    assert not (tmp_path / "no").exists()


def test_a_grid_that_would_be_a_path_is_refused():
    done = run_job([*QUICK, "--topology", "grid", "--machines", "7"], timeout=60)
    _refused(done, "nearest: 6 or 8")


def test_a_graph_file_sets_the_thread_count(tmp_path):
    """Without --machines the threads backend runs one machine per node of the file."""
    nx.write_edgelist(nx.cycle_graph(6), tmp_path / "six.edgelist", data=False)
    out = tmp_path / "r.json"
    args = [*QUICK, "--topology", str(tmp_path / "six.edgelist"), "--output", str(out)]
    done = run_job(args, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["topology"]["n_nodes"] == 6


@pytest.mark.mpi_launch
def test_backend_simulated_in_several_mpi_ranks_is_refused():
    done = run_job([*QUICK, "--backend", "simulated"], n_ranks=2, timeout=60)
    _refused(done, "--backend simulated under a launcher that started 2 ranks")


@pytest.mark.parametrize(
    "option",
    [
        ["--checkpoint", "ck"],
        ["--resume", "ck"],
        ["--peer-timeout", "5"],
    ],
)
def test_options_the_simulator_cannot_apply_are_refused(tmp_path, option):
    done = run_job([*QUICK, "--backend", "simulated", *option], timeout=60, cwd=tmp_path)
    _refused(done, "does not apply on --backend simulated")
    assert option[0] in done.stderr
    assert not (tmp_path / "ck").exists()
