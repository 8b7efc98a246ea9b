/*
 * opcheck.cpp - an uploaded model's operators checked against remat's
 * allow-list (worker/allowed_ops.h, docs/security.md "Operators") after
 * torch::jit::load and before any of its methods runs.
 *
 * Every method of every submodule, and every forward hook, is inlined (on
 * a copy of its graph: the calls to other methods and functions replaced
 * by their bodies) and each node's kind, in every nested block, looked up.
 * A call left after inlining (a method through an interface, a function
 * whose graph is not there) is refused: remat cannot see what it runs.
 * The deepest submodules are checked first, so that a refusal names the
 * method that holds the op rather than the root forward it is inlined in.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <ATen/core/class_type.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>

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

    /* Checks f's inlined graph once; where says whose method it is. */
    void function(torch::jit::Function &f, const std::string &where)
    {
        if (!done_.insert(&f).second)
            return;
        torch::jit::GraphFunction *gf = torch::jit::tryToGraphFunction(f);
        if (gf == nullptr)
            throw Failure("the model's " + where +
                          " is native code, not TorchScript, which remat cannot check (remat's "
                          "operator allow-list refuses it: docs/security.md, Operators)");
        std::shared_ptr<torch::jit::Graph> g = gf->graph()->copy();
        /* Inline replaces each call by the callee's graph as the executor
         * would run it, which with the executor's optimisations off (as
         * load_script sets them) still holds its own calls: one level per
         * pass.  TorchScript has no recursion, so the passes end. */
        for (int pass = 0; inlinable(g->block()) > 0; pass++) {
            if (pass == 1000)
                throw Failure("the model's " + where +
                              " nests calls more than 1000 deep (remat's operator allow-list "
                              "checks every call: docs/security.md, Operators)");
            torch::jit::Inline(*g);
        }
        block(g->block(), where);
    }

  private:
    std::unordered_set<std::string> allowed_;
    std::unordered_map<std::string, std::string> refused_;
    std::unordered_set<const torch::jit::Function *> done_;

    /* The calls Inline can replace: a function's, or a method's whose
     * class it knows (not an interface's), when the callee is TorchScript. */
    static size_t inlinable(torch::jit::Block *b)
    {
        size_t n = 0;
        for (torch::jit::Node *node : b->nodes()) {
            torch::jit::Function *callee = nullptr;
            if (node->kind() == c10::prim::CallFunction) {
                auto ft = node->input(0)->type()->cast<c10::FunctionType>();
                callee = ft ? ft->function() : nullptr;
            } else if (node->kind() == c10::prim::CallMethod) {
                auto cls = node->input(0)->type()->cast<c10::ClassType>();
                callee = cls ? cls->findMethod(node->s(c10::attr::name)) : nullptr;
            }
            if (callee != nullptr && torch::jit::tryToGraphFunction(*callee) != nullptr)
                n++;
            for (torch::jit::Block *sub : node->blocks())
                n += inlinable(sub);
        }
        return n;
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
                function(*f, "method " + std::string(m) + " of class " + cname + ", entered in " +
                                 where);
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
            check.function(*hook, method_of(hook->name() + " (a forward pre-hook)", m.first));
        for (torch::jit::Function *hook : cls->getForwardHooks())
            check.function(*hook, method_of(hook->name() + " (a forward hook)", m.first));
    }
}

} // namespace rw
