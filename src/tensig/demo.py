"""The main job of ``make demo``: ``tensig verify`` on the blog's shape bugs and their fixes,
then a walk through ``tensig spec`` on real specs."""

from __future__ import annotations

import shlex

from tensig.cli import main as cli

EXAMPLES: list[tuple[str, list[str]]] = [
    ("Matrix multiplication: j is contracted, its sizes must agree.",
     ["ij;jk=>ik", "3,4", "4,5"]),
    ("Attention scores, multichar mode, with batch and head axes as a batch row.",
     ["b, h|q, d; b, h|k, d => b, h|q, k", "8,12|128,64", "8,12|256,64"]),
    ("A strided valid convolution: output size inferred from input and kernel sizes.",
     ["...|stride*oh<+kh, stride*ow<+kw, ..ic..; |kh, kw, ..ic.. -> oc => ...|oh, ow, oc",
      "16|65,65,32", "3,3,32->64", "--param", "stride=2"]),
    ("Symbolic sizes: the same convolution for every input size T, with its condition.",
     ["2*o<+k; k => o", "T", "3"]),
    ("A forgotten '|': omitted batch rows share '...', so the kernel must be batch-free.",
     ["...|2*oh<+kh; kh => ...|oh", "8|9", "3"]),
    ("Concatenation along a shared leading axis.",
     ["s, a; s, b => s, a^b", "4,3", "4,5"]),
    ("A deliberate error: operand 1 is transposed, so j disagrees (4 vs 5).",
     ["ij;jk=>ik", "3,4", "5,4"]),
]


def main(train: bool = True) -> int:
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples"
    if examples.is_dir():
        print("# Verify the blog's four shape bugs, their fixes and an attention block, for")
        print("# all sizes at once (each bug runs silently at B == T == 16).")
        print(f"$ tensig verify {examples.name}/")
        status = cli(["verify", str(examples)])
        print(f"(exit status {status}: 1 means something was found)\n")
    for title, args in EXAMPLES:
        print(f"# {title}")
        print("$ tensig spec " + " ".join(shlex.quote(a) for a in args))
        status = cli(["spec", *args])
        print(f"(exit status {status})\n")
    if train:
        from tensig.demos import digits, gpt, moons

        print("# Training with the model layer: the two-moons MLP (parameters sized by use)")
        moons.main()
        print("\n# Handwritten digits: a CNN with convolution and max pooling in the notation")
        digits.main()
        print("\n# A character-level GPT on the shipped tales (a short run of a small one; "
              "`python -m tensig.demos.gpt` trains the full demo)")
        gpt.main(steps=60, cfg=gpt.SMALL, plot=None, samples=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
