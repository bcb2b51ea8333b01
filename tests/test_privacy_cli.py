"""The command-line accountant: output, JSON, calibration, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dpnet.privacy import epsilon_for
from dpnet.privacy.__main__ import main

BASE = ["--q", "0.01", "--steps", "500", "--delta", "1e-5"]


def test_module_runs_and_prints_every_field() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "dpnet.privacy", "--sampling", "poisson", "--sigma", "1.2", *BASE],
        capture_output=True,
        text=True,
        check=True,
    )
    want = epsilon_for("poisson", 0.01, 1.2, 500, 1e-5)
    assert f"epsilon = {want['epsilon']:.6g}" in out.stdout
    assert f"best order = {want['best_order']:g}" in out.stdout
    assert "conversion = improved" in out.stdout
    assert f"PLD epsilon = {want['pld_epsilon']:.6g}" in out.stdout


def test_json_fixed_size(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "--sampling",
                "fixed",
                "--n",
                "10000",
                "--sigma",
                "1.2",
                "--json",
                "--conversion",
                "classic",
                *BASE,
            ]
        )
        == 0
    )
    res = json.loads(capsys.readouterr().out)
    want = epsilon_for("fixed", 0.01, 1.2, 500, 1e-5, n=10000, conversion="classic")
    assert res == want and res["pld_epsilon"] is None


def test_target_epsilon_prints_sigma(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--sampling", "poisson", "--target-epsilon", "2", "--json", *BASE]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["epsilon"] <= 2.0 and res["target_epsilon"] == 2.0
    assert (
        epsilon_for("poisson", 0.01, res["noise_multiplier"] * 0.999, 500, 1e-5, with_pld=False)[
            "epsilon"
        ]
        > 2.0
    )


@pytest.mark.parametrize(
    "argv,msg",
    [
        (["--sampling", "fixed", "--sigma", "1", *BASE], "needs the dataset size n"),
        (["--sampling", "poisson", *BASE], "give --sigma"),
        (["--sampling", "poisson", "--sigma", "-1", *BASE], "noise multiplier must be in"),
        (
            [
                "--sampling",
                "poisson",
                "--sigma",
                "1",
                "--q",
                "2",
                "--steps",
                "5",
                "--delta",
                "1e-5",
            ],
            "sampling rate q must be in [0, 1]",
        ),
        (["--sampling", "bernoulli", "--sigma", "1", *BASE], "invalid choice"),
        (["--sampling", "poisson", "--sigma", "x", *BASE], "got 'x'"),
    ],
)
def test_bad_input_one_line_error(
    argv: list[str], msg: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(argv)  # argparse errors too: a return value, no SystemExit
    err = capsys.readouterr().err
    assert code == 2 and msg in err and err.count("\n") == 1 and err.startswith("error: ")
