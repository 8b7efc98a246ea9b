/*
 * opcheck.cpp - an uploaded model's operators checked against remat's
 * allow-list (worker/allowed_ops.h, docs/security.md "Operators") after
 * torch::jit::load and before any of its methods runs.
 *
 * Every method of every submodule, and every forward hook, is walked, each
 * node's kind in every nested block looked up, and every call followed
 * into the function or method it runs, each graph once: what inlining
 * every call would show (torch::jit::Inline), without the copy of each
 * callee at each call site, which for ViT-B/16 cost 0.6-1.2 s.  A call
 * whose callee is not known before it runs (a method through an
 * interface) is refused: remat cannot see what it would run.  The deepest
 * submodules are checked first, so that a refusal names the method that
 * holds the op rather than a parent's forward that calls it.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <ATen/core/class_type.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "allowed_ops.h"
#include "shim_private.h"

namespace rw
{

namespace
{

/* A callee's where: the module's method that leads to it, then the calls,
 * "method forward of submodule 'enc' (via function attend, method __call__
 * of class Cache)", so that the method a refusal names is always the
 * model's own (rematd reads it: api/jobs_common.c). */
std::string via(const std::string &where, const std::string &what)
{
    if (where.find(" (via ") == std::string::npos)
        return where + " (via " + what + ")";
    return where.substr(0, where.size() - 1) + ", " + what + ")";
}

class OpCheck
{
  public:
    OpCheck()
    {
        for (const char *k : rw_allowed_prim_structure)
            allowed_.insert(k);
        for (const char *k : rw_allowed_prim_values)
            allowed_.insert(k);
        for (const char *k : rw_allowed_aten_tensors)
            allowed_.insert(k);
        for (const char *k : rw_allowed_aten_values)
            allowed_.insert(k);
        for (const char *k : rw_allowed_aten_newer)
            allowed_.insert(k);
        for (const rw_refused_op &r : rw_refused_ops)
            refused_.emplace(r.kind, r.why);
    }

    /* Checks f's graph once, and every function and method it calls;
     * where says whose method it is. */
    void function(torch::jit::Function &f, const std::string &where)
    {
        if (!done_.insert(&f).second)
            return;
        torch::jit::GraphFunction *gf = torch::jit::tryToGraphFunction(f);
        if (gf == nullptr)
            throw Failure("the model's " + where +
                          " is native code, not TorchScript, which remat cannot check (remat's "
                          "operator allow-list refuses it: docs/security.md, Operators)");
        /* TorchScript has no recursion, so the calls end; a chain deeper
         * than any honest model's is refused rather than followed. */
        if (++depth_ > 1000)
            throw Failure("the model's " + where +
                          " nests calls more than 1000 deep (remat's operator allow-list "
                          "checks every call: docs/security.md, Operators)");
        /* Compiles it if the loader left it to first use; runs nothing. */
        gf->ensure_defined();
        block(gf->graph()->block(), where);
        depth_--;
    }

  private:
    std::unordered_set<std::string> allowed_;
    std::unordered_map<std::string, std::string> refused_;
    std::unordered_set<const torch::jit::Function *> done_;
    int depth_ = 0;

    /* The function a call node runs: a function's, or a method's whose
     * class is known (not an interface's); nullptr for any other node. */
    static torch::jit::Function *callee(torch::jit::Node *n, std::string &what)
    {
        if (n->kind() == c10::prim::CallFunction) {
            auto ft =
                n->inputs().empty() ? nullptr : n->input(0)->type()->cast<c10::FunctionType>();
            torch::jit::Function *f = ft ? ft->function() : nullptr;
            if (f != nullptr)
                what = "function " + f->name();
            return f;
        }
        if (n->kind() == c10::prim::CallMethod) {
            auto cls = n->inputs().empty() ? nullptr : n->input(0)->type()->cast<c10::ClassType>();
            torch::jit::Function *f = cls ? cls->findMethod(n->s(c10::attr::name)) : nullptr;
            if (f != nullptr)
                what = "method " + f->name() + " of class " +
                       (cls->name() ? cls->name()->name() : std::string("?"));
            return f;
        }
        return nullptr;
    }

    void block(torch::jit::Block *b, const std::string &where)
    {
        for (torch::jit::Node *n : b->nodes()) {
            node(n, where);
            for (torch::jit::Block *sub : n->blocks())
                block(sub, where);
        }
    }

    void node(torch::jit::Node *n, const std::string &where)
    {
        /* A call is followed into its callee, which the interpreter runs
         * as it is (the executor's optimisations are off: load_script),
         * so every graph that can run is checked once. */
        std::string what;
        if (torch::jit::Function *f = callee(n, what)) {
            function(*f, via(where, what));
            return;
        }
        std::string kind = n->kind().toQualString();
        auto r = refused_.find(kind);
        if (r != refused_.end())
            refuse(kind, where, "it " + r->second);
        if (allowed_.count(kind) == 0) {
            std::string ns = kind.substr(0, kind.find("::"));
            refuse(kind, where,
                   ns == "aten" || ns == "prim"
                       ? "an operator remat has not reviewed"
                       : "an operator of namespace " + ns +
                             "::, not aten:: or prim:: (custom, backend and distributed "
                             "operators are not allowed)");
        }
        /* A context manager's __enter__ and __exit__ run when the
         * interpreter reaches these nodes: they are checked as methods. */
        if (n->kind() == c10::prim::Enter || n->kind() == c10::prim::Exit) {
            c10::ClassTypePtr cls =
                n->inputs().empty() ? nullptr : n->input(0)->type()->cast<c10::ClassType>();
            if (!cls)
                refuse(kind, where, "it enters an object whose class remat cannot see");
            std::string cname = cls->name() ? cls->name()->name() : "?";
            for (const char *m : {"__enter__", "__exit__"}) {
                torch::jit::Function *f = cls->findMethod(m);
                if (f == nullptr)
                    refuse(kind, where, "it enters an object of class " + cname + " with no " + m);
                function(*f, via(where, std::string(m) + " of class " + cname));
            }
        }
    }

    [[noreturn]] void refuse(const std::string &kind, const std::string &where,
                             const std::string &why)
    {
        throw Failure("the model calls " + kind + " in " + where + ": " + why +
                      " (remat's operator allow-list refuses it: docs/security.md, Operators)");
    }
};

/* "method forward of submodule 'layers.3'", "method forward of the model". */
std::string method_of(const std::string &method, const std::string &module)
{
    return "method " + method +
           (module.empty() ? std::string(" of the model") : " of submodule '" + module + "'");
}

} // namespace

void check_ops(const torch::jit::Module &root)
{
    std::vector<std::pair<std::string, torch::jit::Module>> mods;
    for (const auto &m : root.named_modules())
        mods.emplace_back(m.name, m.value);
    /* Deepest first: an op is reported in the innermost method that has it. */
    auto depth = [](const std::string &name) {
        return name.empty() ? 0 : 1 + std::count(name.begin(), name.end(), '.');
    };
    std::stable_sort(mods.begin(), mods.end(),
                     [&](const auto &a, const auto &b) { return depth(a.first) > depth(b.first); });
    OpCheck check;
    for (const auto &m : mods) {
        for (const torch::jit::Method &meth : m.second.get_methods())
            check.function(meth.function(), method_of(meth.name(), m.first));
        const c10::ClassTypePtr &cls = m.second.type();
        for (torch::jit::Function *hook : cls->getForwardPreHooks())
            check.function(*hook, method_of(hook->name(), m.first) + " (a forward pre-hook)");
        for (torch::jit::Function *hook : cls->getForwardHooks())
            check.function(*hook, method_of(hook->name(), m.first) + " (a forward hook)");
    }
}

} // namespace rw
