"""Every config of genolong: YAML files validated into dataclasses (:mod:`.schema`, whose
names this package exports), presets with ``extends:`` and ``--set`` overrides
(:mod:`.presets`), and the ``model:`` section shared by pretraining and fine-tuning
(:mod:`.model_section`). The last two need the attention registry and the model
configuration, which themselves use :mod:`.schema`: import them from their modules."""

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
