/* problems.c - the problem types rematd answers with: the slug after
 * /problems/ and its fixed title (RFC 9457: the title is the same for every
 * occurrence of a type). */
#include "config.h"

#include <string.h>

#include "http_private.h"

static const struct {
    const char *slug, *title;
} problem_titles[] = {
    {"not-found", "Not found"},
    {"method-not-allowed", "Method not allowed"},
    {"unauthorized", "Unauthorized"},
    {"body-too-large", "Request body too large"},
    {"unsupported-media-type", "Unsupported media type"},
    {"invalid-json", "Malformed JSON"},
    {"json-too-deep", "JSON nested too deeply"},
    {"validation", "Invalid field"},
    {"limit-exceeded", "Limit exceeded"},
    {"invalid-idempotency-key", "Invalid Idempotency-Key"},
    {"idempotency-key-reused", "Idempotency-Key reused with a different body"},
    {"unsupported", "Not supported"},
    {"infeasible", "No plan fits the budget"},
    {"job-not-ready", "Job not done"},
    {"lease-conflict", "Lease not held"},
    {"invalid-archive", "Not a zip archive"},
    {"not-torchscript", "Not a TorchScript archive"},
    {"unsafe-archive", "Unsafe archive"},
    {"unsupported-model", "Model not supported"},
    {"storage-full", "Model storage full"},
    {"model-in-use", "Model in use"},
    {"model-deleted", "Model deleted"},
    {"unavailable", "Service unavailable"},
    {"queue-full", "Queue full"},
    {"solve-deadline", "Solve deadline passed"},
    {"solve-memory", "Solve needs too much memory"},
    {"shutting-down", "Shutting down"},
    {"canceled", "Canceled"},
    {"plan-profile-mismatch", "Plan made for another profile"},
    {"op-not-allowed", "Operator not allowed"},
    {"profile-failed", "A profile job failed"},
    {"bad-request", "Malformed request"},
    {"not-implemented", "Not implemented"},
    {"request-timeout", "Request timeout"},
    {"uri-too-long", "Request line too long"},
    {"headers-too-large", "Request header fields too large"},
    {"http-version-not-supported", "HTTP version not supported"},
    {"internal", "Internal error"},
};

const char *rematd__problem_title(const char *slug)
{
    for (size_t i = 0; i < sizeof problem_titles / sizeof problem_titles[0]; i++)
        if (strcmp(problem_titles[i].slug, slug) == 0)
            return problem_titles[i].title;
    return "Error";
}

const char *rematd_problem_title(const char *slug)
{
    return rematd__problem_title(slug);
}
