/*
 * shim.cpp - shim.h's functions: the C boundary of the worker's C++.  Each
 * call runs its job (device.cpp, measure.cpp, execute.cpp) and turns every
 * exception into a filled rw_failure, so that nothing C++ reaches main.c.
 * Also the small helpers every part uses: failures, JSON fields, progress.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <c10/util/Exception.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "rematx/utf8.h"
#include "shim.h"
#include "shim_private.h"

namespace rw
{

namespace
{

/* rw_set_op_check's switch: one per process, as the device is. */
bool g_op_check = true;

std::string trimmed(const std::string &s)
{
    size_t b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos)
        return "";
    size_t e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}

/* "builtins.RuntimeError: ...", "RuntimeError: ...": the line a
 * TorchScript traceback ends with, naming the exception raised. */
bool names_exception(const std::string &line)
{
    size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0 ||
        (colon + 1 < line.size() && line[colon + 1] != ' '))
        return false;
    for (size_t i = 0; i < colon; i++) {
        char c = line[i];
        if (!(isalnum((unsigned char)c) || c == '_' || c == '.'))
            return false;
    }
    std::string kind = line.substr(0, colon);
    return kind.size() >= 5 &&
           (kind.compare(kind.size() - 5, 5, "Error") == 0 ||
            (kind.size() >= 9 && kind.compare(kind.size() - 9, 9, "Exception") == 0));
}

} // namespace

std::string first_line(const char *msg)
{
    std::vector<std::string> lines;
    const char *p = msg != nullptr ? msg : "";
    for (;;) {
        const char *nl = strchr(p, '\n');
        std::string line = trimmed(nl ? std::string(p, (size_t)(nl - p)) : std::string(p));
        if (!line.empty())
            lines.push_back(line);
        if (!nl)
            break;
        p = nl + 1;
    }
    if (lines.empty())
        return "(the error had no message)";
    /* The interpreter's own first line says only that something failed; the
     * cause is the exception named at the end of its traceback, whose text
     * may start on the next line (a message that starts with a newline). */
    if (lines[0].rfind("The following operation failed in the TorchScript interpreter", 0) == 0)
        for (size_t i = lines.size(); i-- > 1;)
            if (names_exception(lines[i])) {
                std::string cause = lines[i];
                if (cause.back() == ':' && i + 1 < lines.size())
                    cause += " " + lines[i + 1];
                return job_reason(cause, 300);
            }
    return job_reason(lines[0], 300);
}

std::string job_reason(const std::string &s, size_t max_bytes)
{
    std::string out;
    const unsigned char *p = reinterpret_cast<const unsigned char *>(s.data());
    for (size_t i = 0; i < s.size();) {
        size_t len = rematx_utf8_seq(p + i, s.size() - i);
        std::string ch = len == 0                                    ? "?"
                         : len == 1 && (p[i] < 0x20 || p[i] == 0x7f) ? " "
                                                                     : s.substr(i, len);
        if (out.size() + ch.size() > max_bytes)
            break;
        out += ch;
        i += len == 0 ? 1 : len;
    }
    out = trimmed(out);
    return out.empty() ? "(the error had no message)" : out;
}

bool is_oom(const std::string &msg)
{
    return msg.find("out of memory") != std::string::npos ||
           msg.find("can't allocate memory") != std::string::npos;
}

std::string jstr(const json_t *o, const char *key, const char *dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

int64_t jint(const json_t *o, const char *key, int64_t dflt, const std::string &where)
{
    const json_t *v = json_object_get(o, key);
    if (v == nullptr || json_is_null(v))
        return dflt;
    if (!json_is_integer(v))
        throw Failure(where + ": " + key + " must be an integer");
    return (int64_t)json_integer_value(v);
}

void Progress::operator()(int stage, int stages, const char *activity) const
{
    if (fn != nullptr && fn(ctx, stage, stages, activity) != 0)
        throw Failure("abandoned: the lease was lost or the worker is stopping", true, true);
}

bool op_check_on()
{
    return g_op_check;
}

} // namespace rw

namespace
{

bool g_open = false;

/* Runs f, turning every exception into a filled rw_failure. */
template <class F> json_t *guarded(F f, struct rw_failure *why)
{
    std::string reason;
    bool retry = false, abandoned = false;
    try {
        if (!g_open)
            throw rw::Failure("rw_open was not called");
        return f();
    } catch (const rw::Failure &e) {
        reason = e.what();
        retry = e.retryable;
        abandoned = e.abandoned;
    } catch (const c10::Error &e) {
        reason = rw::first_line(e.what_without_backtrace());
        if (rw::is_oom(reason))
            reason = "device out of memory: " + reason;
    } catch (const std::bad_alloc &) {
        reason = "out of memory (host)";
    } catch (const std::exception &e) {
        reason = rw::first_line(e.what());
    }
    rw::the_device().release_cache();
    if (why != nullptr) {
        why->retryable = retry;
        why->abandoned = abandoned;
        snprintf(why->reason, sizeof why->reason, "%s",
                 rw::job_reason(reason, sizeof why->reason - 1).c_str());
    }
    return nullptr;
}

} // namespace

extern "C" int rw_open(const char *device, long long cpu_limit_bytes, struct rw_failure *why)
{
    g_open = true; /* guarded() refuses to run before it */
    json_t *ok = guarded(
        [&]() -> json_t * {
            rw::open_device(device != nullptr ? device : "cpu", cpu_limit_bytes);
            return json_true();
        },
        why);
    if (ok == nullptr) {
        g_open = false;
        return -1;
    }
    json_decref(ok);
    return 0;
}

extern "C" void rw_set_op_check(int on)
{
    rw::g_op_check = on != 0;
}

extern "C" json_t *rw_profile(const json_t *spec, rw_progress_fn progress, void *ctx,
                              struct rw_failure *why)
{
    rw::Progress p{progress, ctx};
    return guarded([&] { return rw::profile(spec, p); }, why);
}

extern "C" json_t *rw_validate(const json_t *spec, rw_progress_fn progress, void *ctx,
                               struct rw_failure *why)
{
    rw::Progress p{progress, ctx};
    return guarded([&] { return rw::validate(spec, p); }, why);
}
