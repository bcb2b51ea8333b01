"""Command-line accountant for subsampled Gaussian steps.

python -m dpnet.privacy --sampling poisson|fixed --q Q --sigma S --steps T --delta D
                        [--n N] [--conversion improved|classic] [--json]
python -m dpnet.privacy ... --target-epsilon E    (prints the noise multiplier reaching E)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from dpnet.errors import DpnetError
from dpnet.privacy.rdp import CONVERSIONS, SAMPLING_SCHEMES, calibrate_noise_multiplier, epsilon_for


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit status 2
        self.exit(2, f"error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m dpnet.privacy", description=__doc__.splitlines()[0])
    p.add_argument(
        "--sampling",
        required=True,
        choices=SAMPLING_SCHEMES,
        help="poisson (add/remove-one) or fixed (batches without replacement, "
        "replace-one; needs --n)",
    )
    p.add_argument("--q", type=float, required=True, help="sampling rate (batch size / n)")
    p.add_argument("--sigma", type=float, help="noise multiplier (std / L2 sensitivity)")
    p.add_argument("--steps", type=int, required=True, help="number of noisy steps")
    p.add_argument("--delta", type=float, required=True)
    p.add_argument("--n", type=int, help="dataset size (required for --sampling fixed)")
    p.add_argument("--conversion", choices=CONVERSIONS, default="improved")
    p.add_argument("--target-epsilon", type=float, help="print the sigma that reaches it")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def _fmt(x: float | None) -> str:
    return "n/a (no PLD for fixed-size sampling)" if x is None else f"{x:.6g}"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
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
        )
    except DpnetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.target_epsilon is not None:
        res["target_epsilon"] = args.target_epsilon
    if args.json:
        print(json.dumps(res))
        return 0
    if args.target_epsilon is not None:
        print(f"noise multiplier (sigma) = {sigma:.6g} reaches epsilon <= {args.target_epsilon}")
    print(
        f"epsilon = {res['epsilon']:.6g} at delta = {res['delta']:g} "
        f"({res['sampling']} sampling, {res['relation']})"
    )
    print(f"best order = {res['best_order']:g}")
    print(f"conversion = {res['conversion']}")
    print(f"PLD epsilon = {_fmt(res['pld_epsilon'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
