"""`train_from_study STUDY_ID --name NAME [...]`: fine-tune a dense retriever on a study's human
judgments (gold or majority choice as positive, unchosen candidates as hard negatives) and
register it. It lives in annotation because retrieval may not know studies; the training itself
is retrieval's, and annotation.services.study_training prepares it as the study page does."""

from annotation.services import get_study
from annotation.services.study_training import DEFAULT_VALIDATION_SHARE, start_study_training, study_training_arguments
from jobs.progress import terminal_progress
from retrieval.management.base import JsonCommand
from retrieval.management.training_arguments import add_training_arguments, job_summary, training_parameters


class Command(JsonCommand):
    help = "Fine-tune a dense retriever on a study's judgments and register it."

    def add_command_arguments(self, parser):
        parser.add_argument("study_id", type=int)
        parser.add_argument(
            "--validation-share",
            type=float,
            default=DEFAULT_VALIDATION_SHARE,
            help="Share of the items held out for early stopping.",
        )
        add_training_arguments(parser)

    def run(self, **options):
        study = get_study(options["study_id"])
        parameters = {**training_parameters(options), "validation_share": options["validation_share"]}
        if options["run_async"]:
            return job_summary(start_study_training(study, **parameters))
        from retrieval.training import train_retriever  # torch loads only here

        return train_retriever(
            study.collection,
            **study_training_arguments(study, **parameters),
            progress=terminal_progress(f"train {parameters['name']}"),
        )
