// YAML documents (kubeconfig files, settings given as YAML), parsed with js-yaml
// alone: client-node's loadYaml does the same and then runs its model serializer,
// whose import costs about 21 MB of RSS and 350 ms of start-up (lib/kube/rest.ts).
import yaml from 'js-yaml';

/** One YAML document; throws on a syntax error and on a document that loads as a falsy scalar (as client-node's loadYaml). */
export function loadYaml<T = unknown>(text: string): T {
  const doc = yaml.load(text);
  if (!doc) throw new Error('Failed to load YAML');
  return doc as T;
}
