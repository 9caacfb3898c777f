"""make check's type check: mypy skips no module of service/ or actors/ (pyproject.toml), and none goes on
such a list. The campaign and account
services and the actors are checked from the start, and a module that was moved or deleted leaves
the list with it. Those three are checked strictly too: every flag of `mypy --strict` that mypy takes per
module, set on each of them.
"""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# the length of the list: none is skipped, and none may be
MOST_SKIPPED = 0
ALWAYS_CHECKED = ("service.campaigns", "service.accounts", "actors")
# mypy --strict's flags that an override may set (warn_redundant_casts is global only), and their values
STRICT = {
    "disallow_any_generics": True,
    "disallow_subclassing_any": True,
    "disallow_untyped_calls": True,
    "disallow_untyped_defs": True,
    "disallow_incomplete_defs": True,
    "check_untyped_defs": True,
    "disallow_untyped_decorators": True,
    "warn_unused_ignores": True,
    "warn_return_any": True,
    "implicit_reexport": False,
    "strict_equality": True,
    "extra_checks": True,
}


def skipped() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    return [
        module
        for override in config.get("overrides", [])
        if override.get("ignore_errors")
        for module in ([override["module"]] if isinstance(override["module"], str) else override["module"])
    ]


def test_the_skipped_modules_grow_no_more() -> None:
    assert len(skipped()) <= MOST_SKIPPED, f"{len(skipped())} modules skipped, at most {MOST_SKIPPED}"


def test_the_campaigns_accounts_and_actors_are_never_skipped() -> None:
    found = [m for m in skipped() if any(m == p or m.startswith(p + ".") for p in ALWAYS_CHECKED)]
    assert found == []


def test_every_skipped_module_exists() -> None:
    missing = [
        module
        for module in skipped()
        if not (ROOT / f"{module.replace('.', '/')}.py").is_file()
        and not (ROOT / module.replace(".", "/") / "__init__.py").is_file()
    ]
    assert missing == [], "moved or deleted: take them off the list"


def strict_flags(package: str) -> dict[str, bool]:
    """The strict flags a module of `package` gets: the global section's, the `package.*` override's over them,
    and any override naming a module of the package over those (mypy: the more specific pattern wins)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    flags = {flag: config[flag] for flag in STRICT if flag in config}
    overrides = [
        (override, [override["module"]] if isinstance(override["module"], str) else override["module"])
        for override in config.get("overrides", [])
    ]
    wide = [override for override, modules in overrides if f"{package}.*" in modules]
    narrow = [
        override
        for override, modules in overrides
        if f"{package}.*" not in modules and any(m == package or m.startswith(package + ".") for m in modules)
    ]
    for override in wide + narrow:
        flags.update({flag: override[flag] for flag in STRICT if flag in override})
    return flags


def test_the_campaigns_accounts_and_actors_are_checked_strictly() -> None:
    loose = {package: sorted(set(STRICT.items()) - set(strict_flags(package).items())) for package in ALWAYS_CHECKED}
    assert loose == {package: [] for package in ALWAYS_CHECKED}, f"flags off (or not as strict): {loose}"


def test_warn_redundant_casts_is_on_for_all() -> None:
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"].get("warn_redundant_casts") is True
