"""How a component is generated from a declaration (zeus_kfp.settings): its function's text is built from a
template, registered in linecache under a file name of its own and exec'd, and the function becomes the
component.

Why as text: KFP needs every declared field as a real typed parameter, and a lightweight component runs its
function's *source* (kfp embeds inspect.getsource in the component), so the function must exist as text.
Registered in linecache, that text is exactly what inspect.getsource, kfp and tracebacks show. Used by
components/preprocess.py (the job's settings) and components/train.py (the trial request).
"""

import linecache
from typing import Any

from kfp import dsl
from kfp.dsl.python_component import PythonComponent


def generated_component(
    source: str, *, function: str, declared_by: type, namespace: dict[str, Any], base_image: str
) -> PythonComponent:
    """The component whose function `function` is defined by `source`, generated for `declared_by`'s fields;
    `namespace` holds the names its annotations use (Output, Dataset, NamedTuple, ...)."""
    filename = f"<zeus-kfp: {function} component for {declared_by.__module__}.{declared_by.__qualname__}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    # A module name of its own: were the text ever dropped from linecache, inspect.getsource fails
    # loudly instead of reading the generating module's lines as the function's.
    scope = {"__name__": f"components.{function}.generated", **namespace}
    exec(compile(source, filename, "exec"), scope)
    return dsl.component(scope[function], base_image=base_image, install_kfp_package=False)
