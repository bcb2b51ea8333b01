"""Command-line accountant for subsampled Gaussian steps.

python -m dpnet.privacy --sampling poisson|fixed --q Q --sigma S --steps T --delta D
                        [--n N] [--conversion improved|classic] [--json]
python -m dpnet.privacy ... --target-epsilon E    (prints the noise multiplier reaching E)

The RDP answer is printed (and flushed) first; the PLD epsilon follows, computed within a fixed
grid budget decided from the inputs (coarser grid, or "skipped: <why>"). Every number is
checked: a bad one gives one line "error: ..." on stderr and exit status 2. --json prints one
JSON object in which infinite values are the string "inf" and NaN (never expected) is null.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from dpnet.errors import DpnetError
from dpnet.privacy.rdp import (
    CONVERSIONS,
    MAX_COUNT,
    SAMPLING_SCHEMES,
    SIGMA_RANGE,
    calibrate_noise_multiplier,
    epsilon_for,
    poisson_pld_epsilon,
)


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line and exit status 2, in main
        raise _UsageError(message)


def _show(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _number(what: str, check: Callable[[float], bool], want: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            x = math.nan
        if not (math.isfinite(x) and check(x)):
            raise argparse.ArgumentTypeError(f"{what} must be {want}, got {_show(text)}")
        return x

    return parse


def _count(what: str) -> Callable[[str], int]:
    """Parser of a positive integer <= MAX_COUNT, also written as 1e6 or 1000.0."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            try:
                x = float(text)
            except ValueError:
                x = math.nan
            value = int(x) if math.isfinite(x) and x.is_integer() else 0
        if not 1 <= value <= MAX_COUNT:
            raise argparse.ArgumentTypeError(
                f"{what} must be an integer in [1, {MAX_COUNT:.0e}], got {_show(text)}"
            )
        return value

    return parse


_Q = _number("the sampling rate q", lambda x: 0.0 <= x <= 1.0, "in [0, 1]")
_SIGMA = _number(
    "the noise multiplier",
    lambda x: SIGMA_RANGE[0] <= x <= SIGMA_RANGE[1],
    f"in [{SIGMA_RANGE[0]:g}, {SIGMA_RANGE[1]:g}]",
)
_DELTA = _number("delta", lambda x: 0.0 < x < 1.0, "in (0, 1)")
_TARGET = _number("the target epsilon", lambda x: x > 0.0, "a finite positive number")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m dpnet.privacy", description=__doc__.splitlines()[0])
    p.add_argument(
        "--sampling",
        required=True,
        choices=SAMPLING_SCHEMES,
        help="poisson (add/remove-one) or fixed (batches without replacement, "
        "replace-one; needs --n)",
    )
    p.add_argument("--q", type=_Q, required=True, help="sampling rate (batch size / n)")
    p.add_argument("--sigma", type=_SIGMA, help="noise multiplier (std / L2 sensitivity)")
    p.add_argument("--steps", type=_count("steps"), required=True, help="number of noisy steps")
    p.add_argument("--delta", type=_DELTA, required=True)
    p.add_argument(
        "--n",
        type=_count("the dataset size n"),
        help="dataset size (required for --sampling fixed)",
    )
    p.add_argument("--conversion", choices=CONVERSIONS, default="improved")
    p.add_argument("--target-epsilon", type=_TARGET, help="print the sigma that reaches it")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def _json_safe(x: Any) -> Any:
    """inf -> "inf" / "-inf", NaN -> None, recursively: the output is strict JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    return x


def _pld_line(res: dict) -> str:
    if res["pld_epsilon"] is None:
        skipped = res["pld_note"].startswith("skipped")
        return (
            f"PLD epsilon = {res['pld_note']}"
            if skipped
            else f"PLD epsilon = n/a ({res['pld_note']})"
        )
    note = f" ({res['pld_note']})" if res["pld_note"] else ""
    return f"PLD epsilon = {res['pld_epsilon']:.6g}{note}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the accountant; 0 on success, 2 (one "error:" line on stderr) on bad input."""
    try:
        args = _parser().parse_args(argv)
        if args.target_epsilon is not None:
            sigma = calibrate_noise_multiplier(
                args.target_epsilon,
                args.delta,
                args.sampling,
                args.q,
                args.steps,
                n=args.n,
                conversion=args.conversion,
            )
        elif args.sigma is None:
            raise DpnetError("give --sigma, or --target-epsilon to calibrate it")
        else:
            sigma = args.sigma
        res = epsilon_for(
            args.sampling,
            args.q,
            sigma,
            args.steps,
            args.delta,
            n=args.n,
            conversion=args.conversion,
            with_pld=False,
        )
    except (_UsageError, DpnetError) as exc:
        print("error: " + " ".join(str(exc).split()), file=sys.stderr)  # one line
        return 2
    if args.target_epsilon is not None:
        res["target_epsilon"] = args.target_epsilon
    if not args.json:
        if args.target_epsilon is not None:
            print(
                f"noise multiplier (sigma) = {sigma:.6g} reaches epsilon <= {args.target_epsilon}"
            )
        print(
            f"epsilon = {res['epsilon']:.6g} at delta = {res['delta']:g} "
            f"({res['sampling']} sampling, {res['relation']})"
        )
        print(f"best order = {res['best_order']:g}")
        print(f"conversion = {res['conversion']}", flush=True)
    if args.sampling == "poisson":
        res.update(poisson_pld_epsilon(args.q, sigma, args.steps, args.delta))
    if args.json:
        print(json.dumps(_json_safe(res), allow_nan=False))
    else:
        print(_pld_line(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
