"""Every config of genolong: YAML files validated into dataclasses (:mod:`.schema`, exported here) and
presets with ``extends:`` and ``--set`` overrides (:mod:`.presets`: import them from their module, they
need the attention registry, which uses :mod:`.schema`). ``model:``: :mod:`genolong.model.section`."""

from genolong.config.schema import (
    check_type,
    describe_unknown,
    dump_yaml,
    from_dict,
    load_yaml,
    parse_assignment,
    read_with_extends,
    read_yaml,
    require_mapping,
    to_dict,
    where,
)

__all__ = [
    "check_type", "describe_unknown", "dump_yaml", "from_dict", "load_yaml", "parse_assignment", "read_with_extends",
    "read_yaml", "require_mapping", "to_dict", "where",
]
