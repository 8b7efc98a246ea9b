/*
 * test_opcheck.cpp - the operator allow-list's checker (worker/opcheck.cpp)
 * on modules compiled here from TorchScript source (Module::define), with no Python and
 * nothing of them run: what it refuses, the op, method and path its
 * reason names, what it lets through; and the list itself (no kind both
 * allowed and refused, none twice, every name namespaced, and every
 * generated aten:: name an operator this libtorch has).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <cstdio>
#include <set>
#include <string>

#include "../../worker/allowed_ops.h"
#include "../../worker/shim_private.h"

namespace
{

int failures = 0;

void check(bool ok, const std::string &what)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    if (!ok)
        failures++;
}

/* A module named m holding one submodule "sub" whose class has src's
 * methods; the root's forward calls the submodule's. */
torch::jit::Module make(const std::string &src, const std::string &prelude = "")
{
    static int n = 0;
    torch::jit::Module sub("Sub" + std::to_string(++n));
    sub.define(prelude + src);
    torch::jit::Module root("Root" + std::to_string(n));
    root.register_module("sub", sub);
    root.define("def forward(self, x):\n    return self.sub.forward(x)\n");
    return root;
}

/* The reason check_ops gives, "" when it lets the module through. */
std::string reason(const torch::jit::Module &m)
{
    try {
        rw::check_ops(m);
        return "";
    } catch (const rw::Failure &e) {
        check(!e.retryable, "a refusal is not retryable");
        return e.what();
    }
}

void refused(const std::string &name, const std::string &src, const std::string &want)
{
    std::string r;
    try {
        r = reason(make(src));
    } catch (const std::exception &e) {
        check(false, name + ": does not compile: " + e.what());
        return;
    }
    check(r.rfind(want, 0) == 0 && r.find("operator allow-list refuses it") != std::string::npos,
          name + ": \"" + r + "\" starts with \"" + want + "\"");
}

void allowed(const std::string &name, const std::string &src)
{
    std::string r;
    try {
        r = reason(make(src));
    } catch (const std::exception &e) {
        r = std::string("does not compile: ") + e.what();
    }
    check(r.empty(), name + ": allowed" + (r.empty() ? "" : ": " + r));
}

void the_list()
{
    std::set<std::string> allowed_kinds, refused_kinds;
    bool unique = true, named = true;
    auto add = [&](const char *k) {
        unique = allowed_kinds.insert(k).second && unique;
        named = std::string(k).find("::") != std::string::npos && named;
    };
    for (const char *k : rw_allowed_prim_structure)
        add(k);
    for (const char *k : rw_allowed_prim_values)
        add(k);
    for (const char *k : rw_allowed_aten_tensors)
        add(k);
    for (const char *k : rw_allowed_aten_values)
        add(k);
    for (const char *k : rw_allowed_aten_newer)
        add(k);
    check(unique, "no kind is allowed twice");
    check(named, "every allowed kind has its namespace");
    bool apart = true;
    for (const rw_refused_op &r : rw_refused_ops) {
        refused_kinds.insert(r.kind);
        if (allowed_kinds.count(r.kind)) {
            apart = false;
            check(false, std::string(r.kind) + " is both allowed and refused");
        }
    }
    check(apart, "no kind is both allowed and refused");
    check(allowed_kinds.size() > 1400, "the list has " + std::to_string(allowed_kinds.size()) +
                                           " kinds (the generated part is there)");
    std::set<std::string> registered;
    for (const auto &op : torch::jit::getAllOperators())
        registered.insert(op->schema().name());
    size_t missing = 0;
    std::string first;
    auto look = [&](const char *k) {
        if (!registered.count(k) && missing++ == 0)
            first = k;
    };
    for (const char *k : rw_allowed_aten_tensors)
        look(k);
    for (const char *k : rw_allowed_aten_values)
        look(k);
    /* A libtorch built with other options (no distributed, another
     * version) may lack a few; many missing means the list is not this
     * libtorch's. */
    check(missing <= 20, "the generated aten:: names are this libtorch's operators (" +
                             std::to_string(missing) + " not" +
                             (missing ? ", " + first : std::string()) + ")");
}

} // namespace

int main()
{
    const std::string fwd = "def forward(self, x):\n";
    refused("torch.from_file",
            fwd + "    t = torch.from_file('/etc/hostname', False, 1)\n    return x + t.sum()\n",
            "the model calls aten::from_file in method forward of submodule 'sub': it opens");
    refused("torch.save", fwd + "    torch.save(x, '/tmp/x')\n    return x\n",
            "the model calls aten::save in method forward of submodule 'sub': it writes a file");
    refused("set_ on another tensor's storage",
            fwd + "    y = x.new_empty(0)\n    y.set_(x)\n"
                  "    return y\n",
            "the model calls aten::set_ in method forward of submodule 'sub': it points");
    /* fork and ops.<namespace> are resolved only by the archive loader,
     * not by Module::define: tests/worker/hostile-models.py has them. */
    refused("in a loop's if, two calls down",
            "def inner(self, x):\n    return torch.from_file('/etc/hostname', False, 1) + x\n"
            "def middle(self, x):\n    for i in range(2):\n        if i > 5:\n"
            "            x = self.inner(x)\n    return x\n" +
                fwd + "    return self.middle(x)\n",
            "the model calls aten::from_file in method inner of submodule 'sub'");
    /* An unused method is checked too: it could be called by name. */
    refused("a method nothing calls",
            "def spare(self, x):\n    torch.save(x, '/tmp/y')\n    return x\n" + fwd +
                "    return x\n",
            "the model calls aten::save in method spare of submodule 'sub'");

    allowed("arithmetic, shapes, lists, dicts, strings, control flow",
            fwd + "    d = {'a': x.size(0)}\n    l = [x, x * 2]\n    s = 'n=' + str(len(l))\n"
                  "    y = torch.cat(l, 0)\n    for i in range(d['a']):\n        y = y.relu()\n"
                  "    if s.startswith('n'):\n        y = y.view(-1)\n    return y\n");
    allowed("print and warnings", fwd + "    print('shape', x.shape)\n    return x\n");
    the_list();
    printf("%d failures\n", failures);
    return failures == 0 ? 0 : 1;
}
