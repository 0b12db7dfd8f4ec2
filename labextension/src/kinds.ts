// The kinds of cluster the launch form offers, as one table: a new backend is one entry here.
// A batch scheduler's entry lists its form's fields; the form, the preview, the job table on
// the card and the shutdown sentence are shared (panel/batch.tsx, panel/jobs.tsx).

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
  /** A sentence under the wall time: where the head runs. */
  hint?: string;
  /** Offered only where the server says the kind is available (`GET /eugo/kinds`). */
  onlyWhereAvailable?: boolean;
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
  }
];
