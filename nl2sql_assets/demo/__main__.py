"""``python -m nl2sql_assets.demo`` rewrites the repository root's ``nl2sql.yaml`` and ``evals.yaml``."""

from nl2sql_assets.demo.project import write_root_project


def main() -> int:
    for path in write_root_project():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
