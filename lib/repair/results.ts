// What the repair controller does to a broken pod and how it went: the `type` and `result`
// labels of `istio_cni_repair_pods_repaired_total`.
export const REPAIR_TYPES = ['repair', 'delete', 'label'] as const;
export const REPAIR_RESULTS = ['success', 'skip', 'fail'] as const;
export type RepairType = (typeof REPAIR_TYPES)[number];
export type RepairResult = (typeof REPAIR_RESULTS)[number];
