"""The training options shared by `train_retriever` (pairs from a collection) and
`train_from_study` (pairs from human judgments), parsed once into train_retriever's keywords.
Context sizes are each command's own: a collection's are chosen, a study's are what annotators saw."""


def add_training_arguments(parser) -> None:
    parser.add_argument("--name", required=True, help="Name of the retriever to register.")
    parser.add_argument(
        "--base-model",
        default=None,
        help="Model to start from: folder or cached Hugging Face name (default: the platform's).",
    )
    parser.add_argument("--batch-size", type=int, default=32, help="Pairs per batch, all from one book.")
    parser.add_argument("--lr", type=float, default=2e-5, help="Learning rate (AdamW).")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument(
        "--patience", type=int, default=1, help="Stop after this many epochs without a lower validation loss."
    )
    parser.add_argument("--asymmetric", action="store_true", help="Separate query and passage encoders (RELiC).")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--async",
        dest="run_async",
        action="store_true",
        help="Train on a Celery worker (gpu queue) and print the job id.",
    )


def training_parameters(options: dict) -> dict:
    return {
        "name": options["name"],
        "base_model": options["base_model"],
        "batch_size": options["batch_size"],
        "learning_rate": options["lr"],
        "epochs": options["epochs"],
        "patience": options["patience"],
        "asymmetric": options["asymmetric"],
        "max_steps": options["max_steps"],
        "seed": options["seed"],
    }


def job_summary(job) -> dict:
    return {"job_id": job.pk, "status": job.status, "queue": job.queue}
