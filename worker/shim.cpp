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

#include <cstdio>
#include <new>
#include <string>

#include "shim.h"
#include "shim_private.h"

namespace rw
{

std::string first_line(const char *msg)
{
    std::string s(msg != nullptr ? msg : "");
    size_t nl = s.find('\n');
    if (nl != std::string::npos)
        s.resize(nl);
    if (s.size() > 300)
        s.resize(300);
    return s;
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
        snprintf(why->reason, sizeof why->reason, "%s", reason.c_str());
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
