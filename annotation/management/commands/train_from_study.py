"""`train_from_study STUDY_ID --name NAME [...]`: fine-tune a dense retriever on a study's human
judgments (gold or majority choice as positive, unchosen candidates as hard negatives) and
register it. It lives in annotation because retrieval may not know studies; the training itself
is retrieval's."""
from annotation.models import Study
from annotation.training_pairs import study_training_pairs
from retrieval.dense import default_model, mask_token_of
from retrieval.errors import InputError
from retrieval.jobs import terminal_progress
from retrieval.management.base import JsonCommand
from retrieval.management.training_arguments import add_training_arguments, job_summary, training_parameters
from retrieval.training import split_validation, start_training_async, train_retriever


class Command(JsonCommand):
    help = "Fine-tune a dense retriever on a study's judgments and register it."

    def add_command_arguments(self, parser):
        parser.add_argument("study_id", type=int)
        parser.add_argument("--validation-share", type=float, default=0.1,
                            help="Share of the items held out for early stopping.")
        add_training_arguments(parser)

    def run(self, **options):
        study = Study.objects.filter(pk=options["study_id"]).select_related("collection").first()
        if study is None:
            raise InputError(f"no study with id {options['study_id']}", field="study_id")
        if not 0 <= options["validation_share"] < 1:
            raise InputError(f"must be in [0, 1), got {options['validation_share']}", field="validation_share")
        parameters = {**training_parameters(options), "context_left": study.context_left,
                      "context_right": study.context_right}
        pairs = study_training_pairs(study, mask_token_of(parameters["base_model"] or default_model()))
        pairs, validation_pairs = split_validation(pairs, options["validation_share"], parameters["seed"])
        if options["run_async"]:
            return job_summary(start_training_async(study.collection, pairs=pairs, validation_pairs=validation_pairs,
                                                    **parameters))
        return train_retriever(study.collection, **parameters, pairs=pairs, validation_pairs=validation_pairs,
                               progress=terminal_progress(f"train {parameters['name']}"))
