"""Arguments given as Beam `ValueProvider`s, as classic templates give them.

A template's options are `RuntimeValueProvider`s: their values exist only
when the template is launched, on the workers. So a value derived from
them (a checked file pattern, a parsed output path, a sink) is derived
there too: `now_or_at_run_time(function, *arguments)` calls `function` at
once when every argument is known (plain values and
`StaticValueProvider`s), and otherwise returns a `Derived` provider whose
`get()` calls it with the providers' values, on the workers. When the
providers are accessible at construction it is also called once then,
so a bad value fails while the pipeline is built, with the same error it
would raise at run time.
"""

from __future__ import annotations

from typing import Any, Callable

from apache_beam.options.value_provider import StaticValueProvider, ValueProvider

__all__ = ["Derived", "describe", "is_deferred", "now_or_at_run_time", "value"]


def is_deferred(argument: Any) -> bool:
    """Whether `argument` is known only at run time: a ValueProvider other
    than a StaticValueProvider (whose value is fixed when it is made)."""
    return isinstance(argument, ValueProvider) and not isinstance(argument, StaticValueProvider)


def value(argument: Any) -> Any:
    """The value of `argument`: its `get()` for a ValueProvider (on the
    workers for a template's), else the argument itself."""
    return argument.get() if isinstance(argument, ValueProvider) else argument


def describe(argument: Any) -> Any:
    """`argument` for display data: a provider as Beam shows it
    (`RuntimeValueProvider(option: out, type: str, default_value: None)`),
    never its value, which may not exist yet."""
    return str(argument) if isinstance(argument, ValueProvider) else argument


class Derived(ValueProvider):
    """The value `function(*values of arguments)`, computed on every `get()`
    (cheap functions only: checks and parsing), so each run of a template
    uses the values it was launched with. Pickles as its function and
    arguments do (module-level functions, picklable objects)."""

    def __init__(self, function: Callable[..., Any], *arguments: Any) -> None:
        self.function = function
        self.arguments = arguments

    def is_accessible(self) -> bool:
        return all(a.is_accessible() for a in self.arguments if isinstance(a, ValueProvider))

    def get(self) -> Any:
        return self.function(*(value(a) for a in self.arguments))

    def __str__(self) -> str:
        provided = ", ".join(str(a) for a in self.arguments if is_deferred(a))
        return f"resolved at run time from {provided}"


def now_or_at_run_time(function: Callable[..., Any], *arguments: Any) -> Any:
    """`function(*values)` when every argument is known at construction;
    otherwise a `Derived` provider of it, checked at once (by calling it)
    when its providers are accessible, and computed again at run time."""
    if not any(is_deferred(a) for a in arguments):
        return function(*(value(a) for a in arguments))
    derived = Derived(function, *arguments)
    if derived.is_accessible():
        derived.get()  # errors now, while the pipeline is built
    return derived
