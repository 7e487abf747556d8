"""Every config of genolong: YAML files validated into dataclasses (:mod:`.schema`, whose
names this package exports) and presets with ``extends:`` and ``--set`` overrides
(:mod:`.presets`). The presets need the attention registry, which itself uses :mod:`.schema`:
import them from their module. The ``model:`` section is the model's
(:mod:`genolong.model.section`)."""

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
