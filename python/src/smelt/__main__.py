"""python -m smelt bench ...: see smelt.bench."""
import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("bench",):
        print("usage: python -m smelt bench [--models resnet50,bert,gpt2] [--threads 2] [--runs 20] ...\n"
              "       python -m smelt bench --help", file=sys.stderr)
        return 2
    from .bench import main as bench_main
    return bench_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
