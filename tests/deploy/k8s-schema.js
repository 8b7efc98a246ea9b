// k8s-schema.js - validates every object of rendered Kubernetes manifests
// (kubectl kustomize output) against the Kubernetes API schemas that the npm
// package kubernetes-models carries, offline.  Used by `make lint-k8s` and,
// when that has installed the package, by tests/deploy/k8s.sh.
//
//   NODE_PATH=DIR/node_modules node k8s-schema.js FILE.yaml...
//
// Exit 0 when every object validates, 1 otherwise.  Before the files, a
// Deployment with a mistyped field must be rejected: a validator that
// accepts everything fails here.
'use strict';
const fs = require('fs');
const YAML = require('yaml');

const modules = {
    'v1': 'kubernetes-models/v1',
    'apps/v1': 'kubernetes-models/apps/v1',
    'policy/v1': 'kubernetes-models/policy/v1',
    'networking.k8s.io/v1': 'kubernetes-models/networking.k8s.io/v1',
};

function validate(obj) {
    const mod = modules[obj.apiVersion];
    if (!mod)
        throw new Error('no schema module for apiVersion ' + obj.apiVersion);
    const Kind = require(mod)[obj.kind];
    if (!Kind)
        throw new Error('no schema for ' + obj.apiVersion + ' ' + obj.kind);
    new Kind(obj).validate();
}

let bad = 0;
const broken = {
    apiVersion: 'apps/v1', kind: 'Deployment', metadata: {name: 'x'},
    spec: {replicas: 'one', selector: {matchLabels: {a: 'b'}},
           template: {metadata: {labels: {a: 'b'}}, spec: {containers: [{name: 'c', image: 'i', ports: [{containerPort: 'http'}]}]}}},
};
try {
    validate(broken);
    console.log('FAIL the validator accepted a Deployment with replicas: "one"');
    bad++;
} catch (e) {
    console.log('ok   the validator rejects a mistyped Deployment');
}

for (const file of process.argv.slice(2)) {
    const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'));
    for (const doc of docs) {
        const obj = doc.toJS();
        if (obj === null)
            continue;
        const what = file + ': ' + obj.kind + ' ' + (obj.metadata || {}).name;
        try {
            validate(obj);
            console.log('ok   ' + what);
        } catch (e) {
            console.log('FAIL ' + what + ': ' + e.message);
            bad++;
        }
    }
}
process.exit(bad ? 1 : 0);
