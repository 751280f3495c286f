// REST paths of the objects podwire reads and writes (names are validated by
// KubeClient.call before a request is made; they are escaped here all the same).
const e = encodeURIComponent;

export const nodePath = (name: string): string => `/api/v1/nodes/${e(name)}`;
export const namespacePath = (name: string): string => `/api/v1/namespaces/${e(name)}`;
export const podPath = (namespace: string, name: string, subresource?: 'status'): string =>
  `/api/v1/namespaces/${e(namespace)}/pods/${e(name)}${subresource ? `/${subresource}` : ''}`;
export const daemonSetPath = (namespace: string, name: string): string => `/apis/apps/v1/namespaces/${e(namespace)}/daemonsets/${e(name)}`;
