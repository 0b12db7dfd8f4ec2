// The kinds of cluster the launch form offers, as one table: a new backend is one entry here.
// A batch scheduler's entry lists its form's fields; the form, the preview, the job table on
// the card and the shutdown sentence are shared (panel/batch.tsx, panel/jobs.tsx). A kind whose
// body part is not flat (Kubernetes: a head and worker groups) says how to build it (`part`).

/** One field of a batch scheduler's form: a key of the body's part named after the kind. */
export interface IBatchField {
  key: string;
  label: string;
  type: 'text' | 'count' | 'lines';
  default: string | number;
  placeholder?: string;
  title?: string;
  min?: number;
  max?: number;
}

export interface ILaunchKind {
  kind: string;
  /** The switch's label. */
  label: string;
  /** The local form, or the shared batch-scheduler form. */
  form: 'local' | 'batch';
  /** The form's CSS class (tests and styles find it by this). */
  className?: string;
  fields?: IBatchField[];
  /** A sentence under the wall time (or the first field): where the head runs. */
  hint?: string;
  /** Offered only where the server says the kind is available (`GET /eugo/kinds`). */
  onlyWhereAvailable?: boolean;
  /** The body's part from the form's values (empty ones left out); default: the values. */
  part?: (values: Record<string, string | number>) => Record<string, unknown>;
}

/** The `kubernetes` body part: one head and one worker group from the form's flat fields. */
export function kubernetesPart(
  values: Record<string, string | number>
): Record<string, unknown> {
  const has = (key: string) => values[key] !== undefined && values[key] !== '';
  const pick = (keys: [string, string][]) =>
    Object.fromEntries(
      keys.filter(([from]) => has(from)).map(([from, to]) => [to, values[from]])
    );
  return {
    ...pick([
      ['namespace', 'namespace'],
      ['image', 'image'],
      ['queue', 'queue'],
      ['service_account', 'service_account']
    ]),
    head: pick([
      ['head_cpus', 'cpus'],
      ['head_memory', 'memory']
    ]),
    worker_groups: [
      pick([
        ['workers', 'replicas'],
        ['worker_cpus', 'cpus'],
        ['worker_memory', 'memory'],
        ['worker_gpus', 'gpus']
      ])
    ]
  };
}

const walltime = (placeholder: string, title: string): IBatchField => ({
  key: 'walltime',
  label: 'Wall time',
  type: 'text',
  default: '01:00:00',
  placeholder,
  title
});
const nodes: IBatchField = {
  key: 'nodes',
  label: 'Nodes',
  type: 'count',
  default: 2,
  min: 1,
  max: 256
};
const cpus = (label: string): IBatchField => ({
  key: 'cpus_per_node',
  label,
  type: 'count',
  default: 1,
  min: 1,
  max: 4096
});
const memory: IBatchField = {
  key: 'memory_per_node',
  label: 'Memory per node',
  type: 'text',
  default: '',
  placeholder: 'e.g. 16GB (optional)'
};

export const LAUNCH_KINDS: ILaunchKind[] = [
  { kind: 'local', label: 'Local', form: 'local' },
  {
    kind: 'slurm',
    label: 'SLURM',
    form: 'batch',
    className: 'eugo-SlurmForm',
    hint:
      'The Ray head runs in a SLURM job of its own, one of the nodes below (not on this ' +
      'login node); each further node is a worker job.',
    fields: [
      {
        key: 'partition',
        label: 'Partition',
        type: 'text',
        default: '',
        placeholder: 'default'
      },
      {
        key: 'account',
        label: 'Account',
        type: 'text',
        default: '',
        placeholder: 'optional'
      },
      walltime('01:00:00', 'HH:MM:SS, D-HH:MM:SS or minutes'),
      nodes,
      cpus('CPUs per node'),
      {
        key: 'gpus_per_node',
        label: 'GPUs per node',
        type: 'count',
        default: 0,
        min: 0,
        max: 64
      },
      memory,
      {
        key: 'extra',
        label: 'Extra #SBATCH lines',
        type: 'lines',
        default: '',
        placeholder: '--qos=short\n--constraint=a100'
      }
    ]
  },
  {
    kind: 'gridengine',
    label: 'Grid Engine',
    form: 'batch',
    className: 'eugo-GridEngineForm',
    hint:
      'The Ray head runs in a Grid Engine job of its own, one of the nodes below (not on ' +
      'this login node); each further node is a worker job of as many slots.',
    fields: [
      {
        key: 'queue',
        label: 'Queue',
        type: 'text',
        default: '',
        placeholder: 'default'
      },
      {
        key: 'project',
        label: 'Project',
        type: 'text',
        default: '',
        placeholder: 'optional'
      },
      {
        key: 'parallel_environment',
        label: 'Parallel environment',
        type: 'text',
        default: '',
        placeholder: "the server's default (smp)"
      },
      walltime('01:00:00', 'HH:MM:SS'),
      nodes,
      cpus('Slots per node'),
      memory,
      {
        key: 'memory_resource',
        label: 'Memory resource',
        type: 'text',
        default: '',
        placeholder: "the server's default (mem_free...)",
        title:
          'The memory consumable memory per node is requested through (not h_vmem)'
      },
      {
        key: 'extra',
        label: 'Extra #$ lines',
        type: 'lines',
        default: '',
        placeholder: '-l gpu=1\n-ar 12'
      }
    ]
  },
  {
    kind: 'allocation',
    label: "This job's nodes",
    form: 'batch',
    className: 'eugo-AllocationForm',
    onlyWhereAvailable: true,
    hint:
      'Ray across the batch job this server runs in: the head on this node, a worker on each ' +
      "other node through the scheduler's own launcher (srun, qrsh -inherit, pbsdsh), on the " +
      "job's CPUs only. No job is submitted.",
    fields: [
      {
        key: 'margin',
        label: 'Stop before the wall time (s)',
        type: 'count',
        default: 300,
        min: 0,
        max: 604800
      }
    ]
  },
  {
    kind: 'kubernetes',
    label: 'Kubernetes',
    form: 'batch',
    className: 'eugo-KubernetesForm',
    hint:
      'A KubeRay RayCluster in this namespace (the KubeRay operator must be installed); the ' +
      "server uses your kubeconfig, or its pod's service account.",
    part: kubernetesPart,
    fields: [
      {
        key: 'namespace',
        label: 'Namespace',
        type: 'text',
        default: 'default'
      },
      {
        key: 'image',
        label: 'Image',
        type: 'text',
        default: '',
        placeholder: "rayproject/ray of this server's Ray"
      },
      {
        key: 'head_cpus',
        label: 'Head CPUs',
        type: 'count',
        default: 1,
        min: 1,
        max: 4096
      },
      {
        key: 'head_memory',
        label: 'Head memory',
        type: 'text',
        default: '4Gi'
      },
      {
        key: 'workers',
        label: 'Workers',
        type: 'count',
        default: 1,
        min: 0,
        max: 1000
      },
      {
        key: 'worker_cpus',
        label: 'CPUs per worker',
        type: 'count',
        default: 1,
        min: 1,
        max: 4096
      },
      {
        key: 'worker_memory',
        label: 'Memory per worker',
        type: 'text',
        default: '4Gi'
      },
      {
        key: 'worker_gpus',
        label: 'GPUs per worker (nvidia.com/gpu)',
        type: 'count',
        default: 0,
        min: 0,
        max: 64
      },
      {
        key: 'queue',
        label: 'Kueue queue',
        type: 'text',
        default: '',
        placeholder: 'optional (a LocalQueue)'
      },
      {
        key: 'service_account',
        label: 'Service account',
        type: 'text',
        default: '',
        placeholder: "optional (the namespace's default)"
      }
    ]
  }
];
