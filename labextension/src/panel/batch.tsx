// The SLURM launch form: partition, account, wall time, nodes and per-node resources, extra
// #SBATCH lines, an optional profile from the server; Preview shows the exact job scripts.
import { CommandRegistry } from '@lumino/commands';
import * as React from 'react';

import {
  IPlan,
  IProfile,
  ISlurmRequest,
  ISlurmSpec,
  Lifetime,
  previewLaunch
} from '../api';
import { CommandIDs, reportError } from '../commands';
import {
  ClusterNameField,
  FormActions,
  LifetimeField,
  NumberField,
  TextField,
  usePending
} from './fields';

const DEFAULTS: ISlurmSpec = {
  partition: '',
  account: '',
  walltime: '01:00:00',
  nodes: 2,
  cpus_per_node: 1,
  gpus_per_node: 0,
  memory_per_node: '',
  extra: ''
};

/** The body sent to the server: empty optional fields are left out. */
function requestOf(
  name: string,
  lifetime: Lifetime,
  spec: ISlurmSpec,
  profile: string
) {
  const slurm: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(spec)) {
    if (value !== '' && value !== undefined) {
      slurm[key] = value;
    }
  }
  const request: ISlurmRequest = {
    kind: 'slurm',
    name: name.trim(),
    lifetime,
    slurm: slurm as unknown as ISlurmSpec
  };
  if (profile) {
    request.profile = profile;
  }
  return request;
}

function PlanView({ plan }: { plan: IPlan }): JSX.Element {
  return (
    <div className="eugo-Plan" aria-label="Preview">
      <p className="eugo-Plan-summary">{plan.summary}</p>
      {plan.scripts.map(script => (
        <details
          key={script.name}
          className="eugo-Plan-script"
          open={script.name === 'head'}
        >
          <summary>
            {script.name} job script
            {script.count > 1 ? ` (×${script.count})` : ''}
          </summary>
          <pre className="eugo-Plan-text" data-script={script.name}>
            {script.text}
          </pre>
        </details>
      ))}
    </div>
  );
}

interface ISlurmFormProps {
  commands: CommandRegistry;
  profiles: readonly IProfile[];
}

export function SlurmForm({
  commands,
  profiles
}: ISlurmFormProps): JSX.Element {
  const [name, setName] = React.useState('hpc');
  const [spec, setSpec] = React.useState<ISlurmSpec>(DEFAULTS);
  const [lifetime, setLifetime] = React.useState<Lifetime>('server');
  const [profile, setProfile] = React.useState('');
  const [plan, setPlan] = React.useState<IPlan | null>(null);
  const [pending, run] = usePending();

  const chosen = profiles.find(p => p.name === profile);
  // With a profile, only the fields it lets users change stay editable.
  const locked = (key: keyof ISlurmSpec) =>
    !!chosen && !chosen.editable.includes(`slurm.${key}`);
  const set = (key: keyof ISlurmSpec) => (value: string | number) => {
    setSpec({ ...spec, [key]: value });
    setPlan(null);
  };
  const pickProfile = (value: string) => {
    setProfile(value);
    const next = profiles.find(p => p.name === value);
    setSpec({ ...DEFAULTS, ...(next?.body.slurm ?? {}) } as ISlurmSpec);
    setPlan(null);
  };

  const request = () => requestOf(name, lifetime, spec, profile);
  const onPreview = async () => {
    try {
      setPlan(await run(() => previewLaunch(request())));
    } catch (error) {
      await reportError('Could not preview the launch', error);
    }
  };
  const onSubmit = async (event: React.FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const model = await run(() =>
      commands.execute(CommandIDs.launch, request() as any)
    );
    if (model) {
      setPlan(null);
    }
  };

  const text = (
    label: string,
    key: keyof ISlurmSpec,
    placeholder: string,
    title?: string
  ) => (
    <TextField
      label={label}
      ariaLabel={label}
      placeholder={placeholder}
      title={title}
      disabled={locked(key)}
      value={String(spec[key] ?? '')}
      onChange={set(key)}
    />
  );
  const count = (
    label: string,
    key: keyof ISlurmSpec,
    min: number,
    max: number
  ) => (
    <NumberField
      label={label}
      min={min}
      max={max}
      disabled={locked(key)}
      value={Number(spec[key])}
      onChange={set(key)}
    />
  );

  return (
    <form className="eugo-Form eugo-SlurmForm" onSubmit={onSubmit}>
      {profiles.length > 0 && (
        <label className="eugo-Field">
          <span>Profile</span>
          <select
            className="jp-mod-styled eugo-Input"
            aria-label="Profile"
            value={profile}
            onChange={e => pickProfile(e.currentTarget.value)}
          >
            <option value="">None (fill in below)</option>
            {profiles.map(p => (
              <option key={p.name} value={p.name} title={p.description}>
                {p.name}
              </option>
            ))}
          </select>
        </label>
      )}
      <ClusterNameField value={name} onChange={setName} />
      {text('Partition', 'partition', 'default')}
      {text('Account', 'account', 'optional')}
      {text(
        'Wall time',
        'walltime',
        '01:00:00',
        'HH:MM:SS, D-HH:MM:SS or minutes'
      )}
      <p className="eugo-Hint">
        The Ray head runs in a SLURM job of its own, one of the nodes below (not
        on this login node); each further node is a worker job.
      </p>
      {count('Nodes', 'nodes', 1, 256)}
      {count('CPUs per node', 'cpus_per_node', 1, 4096)}
      {count('GPUs per node', 'gpus_per_node', 0, 64)}
      {text('Memory per node', 'memory_per_node', 'e.g. 16GB (optional)')}
      <label className="eugo-Field">
        <span>Extra #SBATCH lines</span>
        <textarea
          className="jp-mod-styled eugo-Input eugo-mod-lines"
          aria-label="Extra #SBATCH lines"
          placeholder={'--qos=short\n--constraint=a100'}
          disabled={locked('extra')}
          rows={2}
          value={spec.extra ?? ''}
          onChange={e => set('extra')(e.currentTarget.value)}
        />
      </label>
      <LifetimeField
        value={lifetime}
        onChange={setLifetime}
        group="eugo-slurm-lifetime"
      />
      <FormActions pending={pending} label="Launch" pendingLabel="Working…">
        <button
          type="button"
          className="jp-Button jp-mod-styled eugo-Action"
          disabled={pending}
          onClick={() => void onPreview()}
        >
          Preview
        </button>
      </FormActions>
      {plan && <PlanView plan={plan} />}
    </form>
  );
}
