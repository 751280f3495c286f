// What one installer round can end in: the `result` label of `istio_cni_installs_total`
// (upstream `cni/pkg/install/monitoring.go` spells them so).
export const INSTALL_RESULTS = ['SUCCESS', 'COPY_BINARIES_FAILURE', 'CREATE_KUBECONFIG_FAILURE', 'CREATE_CNI_CONFIG_FAILURE'] as const;
export type InstallResult = (typeof INSTALL_RESULTS)[number];
