"""A caller's values bound back into a module: the other direction of
``loadlint.facts.summary``.  The project join resolves what each caller
passes (and what the module imports); ``inject`` makes each parameter a
name assigned that value, so every rule resolves it as it resolves a local
assignment."""

from __future__ import annotations

import libcst as cst

from loadlint.facts.collect import ModuleFacts
from loadlint.facts.configs import CONFIG_FILES, bind_files
from loadlint.facts.resolve import Binding, bind_imported
from loadlint.facts.summary import MODULE, jsonable
from loadlint.types import Descriptor


def inject(facts: ModuleFacts, bindings: dict[str, dict[str, Descriptor]]) -> None:
    """Bind parameters to the values a caller gives them: each rule then
    resolves the parameter as a name assigned that value.  A parameter that
    is assigned in its function keeps its bindings (the value is not the
    caller's any more).  Under ``"<module>"``, values of names the module
    imports (``config.WORKERS``, ``WORKERS``), which the join resolved."""
    imported = bindings.get(MODULE)
    if imported:
        bind_imported(facts.names.module_scope, facts.loaders.cpu_count_calls, imported)
    files = bindings.get(CONFIG_FILES)
    if files:
        bind_files(facts.names, facts.calls_between.sites, files)
    for fn in facts.names.functions:
        qual = f"{fn.class_name}.{fn.name}" if fn.class_name else fn.name
        given = bindings.get(qual)
        if not given or fn.nested:
            continue
        p = fn.node.params
        params = {param.name.value: param for param in (*p.posonly_params, *p.params, *p.kwonly_params)}
        for name, descriptor in given.items():
            current = fn.scope.bindings.get(name)
            if name not in params or current is None or len(current) != 1 or current[0].value is not None:
                continue
            node = _expression(descriptor, params[name], facts)
            if node is not None:
                fn.scope.bindings[name] = [Binding(node)]


def _expression(descriptor: Descriptor, param: cst.Param, facts: ModuleFacts) -> cst.BaseExpression | None:
    if descriptor.get("default") and "import" not in descriptor:
        return param.default
    if "value" in descriptor and jsonable(descriptor["value"]):
        return cst.parse_expression(repr(descriptor["value"]))
    if descriptor.get("cpu_count"):
        node = cst.parse_expression("os.cpu_count()")
        facts.loaders.cpu_count_calls.add(id(node))
        return node
    if descriptor.get("lambda"):
        return cst.parse_expression("lambda *args: None")
    return None
