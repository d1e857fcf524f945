"""sackli's own import-linter contract types (pyproject.toml, [tool.importlinter]).

sackli is split into packages: core (the modules directly in `sackli/`) and
the subpackages named in a contract's `packages` (`beam`, `arrow`, ...).
A package's modules import another package only through its front door:

- `package_layers`: packages sit in layers, listed top first; a package
  imports only packages in lower layers. Packages on one layer, written
  `a | b`, are independent: neither imports the other. `core` names the
  modules directly in the root package.
- `declared_interfaces`: a package may import another's public modules and
  the private modules (`_name`) that package declares, on one line of its
  `__init__.py` docstring (the root's for core): `Internal interface: _a,
  _b` (at most three) or `Internal interface: none`. Any other import of
  another package's private module breaks the contract.

Both take `ignore_imports` ("a -> b" expressions, as import-linter's own
contracts do). grimp sees only Python source, so imports of a compiled
module (`compiled_modules`, e.g. `sackli._engine`) are found here, in the
sources, by `declared_interfaces`.

Docstrings and sources are read, never imported: the analysed tree needs
no compiled engine. `lint-imports` puts the working folder on `sys.path`,
so run it from the repository's root (tests/ does).
"""

from __future__ import annotations

import ast
import importlib.util
import pathlib
import re
from dataclasses import dataclass
from typing import Iterator

import grimp
from importlinter.application import contract_utils, output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck

CORE = "core"
MAX_INTERFACE_MODULES = 3
_INTERFACE_LINE = re.compile(r"^Internal interface: (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class _Packages:
    """Which package each module of the root package belongs to."""

    root: str
    subpackages: frozenset[str]

    def package_of(self, module: str) -> str:
        parts = module.split(".")
        if len(parts) > 1 and parts[1] in self.subpackages:
            return parts[1]
        return CORE

    def module_name(self, package: str) -> str:
        return self.root if package == CORE else f"{self.root}.{package}"

    def private_module_of(self, module: str) -> str | None:
        """The private module (`_name`) of its package that `module` is or
        lies in; None for the package itself and its public modules."""
        package = self.package_of(module)
        inner = module.split(".")[1 if package == CORE else 2:]
        if inner and inner[0].startswith("_") and not inner[0].startswith("__"):
            return inner[0]
        return None


def _import_lines(graph: grimp.ImportGraph, importer: str, imported: str) -> str:
    details = graph.get_import_details(importer=importer, imported=imported)
    return ", ".join(f"l.{detail['line_number']}" for detail in details) or "?"


def _package_init(module: str) -> pathlib.Path:
    """The `__init__.py` of package `module`, found without importing
    anything (`find_spec` of a submodule would import its parents, and the
    source tree has no compiled engine)."""
    root, *inner = module.split(".")
    spec = importlib.util.find_spec(root)
    if spec is None or spec.origin is None or not spec.origin.endswith("__init__.py"):
        raise ValueError(f"{root}: not a package with an __init__.py")
    path = pathlib.Path(spec.origin).parent.joinpath(*inner, "__init__.py")
    if not path.is_file():
        raise ValueError(f"{module}: not a package with an __init__.py")
    return path


def _init_docstring(module: str) -> str:
    """The docstring of package `module`'s `__init__.py`, read from its source."""
    path = _package_init(module)
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), str(path))) or ""


def _compiled_imports(root: str, compiled: frozenset[str]) -> Iterator[tuple[str, str, int]]:
    """(importer, compiled module, line) for each import of a module in
    `compiled` in the Python sources of package `root`."""
    folder = _package_init(root).parent
    for path in sorted(folder.rglob("*.py")):
        parts = list(path.relative_to(folder.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        importer = ".".join(parts[:-1] if is_package else parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = importer.split(".") if is_package else importer.split(".")[:-1]
                    package = package[:len(package) - node.level + 1]
                    base = ".".join(package + ([node.module] if node.module else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                if target in compiled:
                    yield importer, target, node.lineno


class _PackagesContract(Contract):
    """The options both contract types share."""

    root = fields.StringField()
    packages = fields.ListField(subfield=fields.StringField())
    ignore_imports = fields.SetField(subfield=fields.ImportExpressionField(), required=False)

    def _remove_ignored_imports(self, graph: grimp.ImportGraph) -> list[str]:
        """Takes the ignored imports out of `graph`; returns the warnings."""
        removal = contract_utils.remove_ignored_imports_and_report(
            graph=graph, ignore_imports=self.ignore_imports,  # type: ignore[arg-type]
            unmatched_alerting=contract_utils.AlertLevel.ERROR)
        return list(removal.warnings)

    def _packages(self) -> _Packages:
        return _Packages(self.root, frozenset(self.packages) - {CORE})  # type: ignore[arg-type]

    def _cross_package_imports(
            self, graph: grimp.ImportGraph) -> Iterator[tuple[str, str, str, str]]:
        """(importer, imported, importer's package, imported's package) for
        every import between two packages of the root."""
        packages = self._packages()
        for importer in sorted(graph.modules):
            if importer != packages.root and not importer.startswith(packages.root + "."):
                continue
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                if imported != packages.root and not imported.startswith(packages.root + "."):
                    continue
                source, target = packages.package_of(importer), packages.package_of(imported)
                if source != target:
                    yield importer, imported, source, target

    def render_broken_contract(self, check: ContractCheck) -> None:
        for problem in check.metadata["problems"]:
            output.print_error(problem, bold=False)
            output.new_line()


class PackageLayersContract(_PackagesContract):
    """Packages in layers (see the module docstring). Options: `root`,
    `packages` (the subpackages that are packages of their own; `core` is
    the rest) and `layers` (top first; `core` may be one of them)."""

    type_name = "package_layers"
    layers = fields.ListField(subfield=fields.StringField())

    def _layer_of(self) -> dict[str, tuple[int, bool]]:
        """Each package's layer (0 is the top) and whether that layer's
        packages are independent of each other."""
        found: dict[str, tuple[int, bool]] = {}
        for index, layer in enumerate(self.layers):  # type: ignore[arg-type]
            names = [name.strip() for name in layer.split("|")]
            for name in names:
                found[name] = (index, len(names) > 1)
        return found

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        warnings = self._remove_ignored_imports(graph)
        layer_of = self._layer_of()
        problems = [f"package {package} is in no layer"
                    for package in sorted(set(self.packages) | {CORE}) if package not in layer_of]
        for importer, imported, source, target in self._cross_package_imports(graph):
            if source not in layer_of or target not in layer_of:
                continue
            (source_layer, independent), (target_layer, _) = layer_of[source], layer_of[target]
            if target_layer < source_layer or (target_layer == source_layer and independent):
                problems.append(
                    f"{importer} -> {imported} ({_import_lines(graph, importer, imported)}): "
                    f"{source} may not import {target}, which is "
                    + ("beside it (independent)" if target_layer == source_layer else "above it"))
        return ContractCheck(kept=not problems, warnings=warnings, metadata={"problems": problems})


class DeclaredInterfacesContract(_PackagesContract):
    """Cross-package imports of private modules only through declared
    interfaces (see the module docstring). Options: `root` and `packages`
    (the subpackages that are packages of their own; `core` is the rest)."""

    type_name = "declared_interfaces"
    compiled_modules = fields.SetField(subfield=fields.StringField(), required=False)

    def _interfaces(self, graph: grimp.ImportGraph,
                    problems: list[str]) -> dict[str, frozenset[str]]:
        """Each package's declared interface; what is wrong with a
        declaration goes to `problems`."""
        packages = self._packages()
        interfaces: dict[str, frozenset[str]] = {}
        for package in sorted(packages.subpackages | {CORE}):
            module = packages.module_name(package)
            lines = _INTERFACE_LINE.findall(_init_docstring(module))
            if len(lines) != 1:
                problems.append(f"{module}'s docstring must have one line "
                                f"'Internal interface: _a, _b' (or 'none'); it has {len(lines)}")
                interfaces[package] = frozenset()
                continue
            text = lines[0].strip()
            names = [] if text == "none" else [name.strip() for name in text.split(",")]
            if len(names) > MAX_INTERFACE_MODULES:
                problems.append(f"{module} declares {len(names)} interface modules; "
                                f"at most {MAX_INTERFACE_MODULES} are allowed")
            for name in names:
                known = graph.modules | self._compiled()
                if not name.startswith("_") or f"{module}.{name}" not in known:
                    problems.append(f"{module} declares {name!r}: not a private module of it")
            interfaces[package] = frozenset(names)
        return interfaces

    def _compiled(self) -> frozenset[str]:
        return frozenset(self.compiled_modules or ())  # type: ignore[arg-type]

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        warnings = self._remove_ignored_imports(graph)
        packages = self._packages()
        problems: list[str] = []
        interfaces = self._interfaces(graph, problems)
        found = [(importer, imported, _import_lines(graph, importer, imported))
                 for importer, imported, _, _ in self._cross_package_imports(graph)]
        found += [(importer, imported, f"l.{line}") for importer, imported, line
                  in _compiled_imports(packages.root, self._compiled())
                  if packages.package_of(importer) != packages.package_of(imported)]
        for importer, imported, lines in found:
            private = packages.private_module_of(imported)
            target = packages.package_of(imported)
            if private is not None and private not in interfaces[target]:
                problems.append(
                    f"{importer} -> {imported} ({lines}): "
                    f"{private} is not in {packages.module_name(target)}'s internal interface")
        return ContractCheck(kept=not problems, warnings=warnings, metadata={"problems": problems})


__all__ = ["DeclaredInterfacesContract", "PackageLayersContract"]
