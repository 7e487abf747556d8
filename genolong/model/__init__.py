"""The genolong encoder (:mod:`.encoder`), its task heads (:mod:`.heads`), the transformers
configuration (:mod:`.configuration`) and model classes (:mod:`.modeling`), registered with
transformers' Auto classes when this package is imported::

    AutoConfig.for_model("genolong", backbone="bigbird", ...)
    AutoModelForMaskedLM.from_pretrained(directory)
"""

from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification

from genolong.model.configuration import GenolongConfig
from genolong.model.modeling import GenolongForMaskedLM, GenolongForSequenceClassification, GenolongModel

AutoConfig.register("genolong", GenolongConfig, exist_ok=True)
for auto_class, model_class in (
    (AutoModel, GenolongModel),
    (AutoModelForMaskedLM, GenolongForMaskedLM),
    (AutoModelForSequenceClassification, GenolongForSequenceClassification),
):
    auto_class.register(GenolongConfig, model_class, exist_ok=True)
