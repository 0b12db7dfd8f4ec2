// The batch scheduler's launch form (SLURM, Grid Engine...), built from the kind's field table
// (kinds.ts): the fields, extra directive lines, an optional profile from the server; Preview
// shows the exact job scripts.
import { CommandRegistry } from '@lumino/commands';
import * as React from 'react';

import {
  IBatchRequest,
  IPlan,
  IProfile,
  Lifetime,
  previewLaunch
} from '../api';
import { CommandIDs, reportError } from '../commands';
import { IBatchField, ILaunchKind } from '../kinds';
import {
  ClusterNameField,
  FormActions,
  LifetimeField,
  NumberField,
  TextField,
  usePending
} from './fields';

type Values = Record<string, string | number>;

function defaults(fields: readonly IBatchField[]): Values {
  return Object.fromEntries(fields.map(f => [f.key, f.default]));
}

/** The body sent to the server: empty optional fields are left out. */
function requestOf(
  launch: ILaunchKind,
  name: string,
  lifetime: Lifetime,
  values: Values,
  profile: string
): IBatchRequest {
  const kind = launch.kind;
  const part: Values = {};
  for (const [key, value] of Object.entries(values)) {
    if (value !== '' && value !== undefined) {
      part[key] = value;
    }
  }
  const request: IBatchRequest = {
    kind,
    name: name.trim(),
    lifetime,
    [kind]: launch.part ? launch.part(part) : part
  };
  if (profile) {
    request.profile = profile;
  }
  return request;
}

export function PlanView({ plan }: { plan: IPlan }): JSX.Element {
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
            {script.name.endsWith('.yaml')
              ? script.name
              : `${script.name} job script`}
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

interface IBatchFormProps {
  commands: CommandRegistry;
  profiles: readonly IProfile[];
  kind: ILaunchKind;
}

export function BatchForm({
  commands,
  profiles,
  kind
}: IBatchFormProps): JSX.Element {
  const fields = kind.fields ?? [];
  const [name, setName] = React.useState('hpc');
  const [values, setValues] = React.useState<Values>(() => defaults(fields));
  const [lifetime, setLifetime] = React.useState<Lifetime>('server');
  const [profile, setProfile] = React.useState('');
  const [plan, setPlan] = React.useState<IPlan | null>(null);
  const [pending, run] = usePending();

  const offered = profiles.filter(p => (p.kind || p.body.kind) === kind.kind);
  const chosen = offered.find(p => p.name === profile);
  // With a profile, only the fields it lets users change stay editable.
  const locked = (key: string) =>
    !!chosen && !chosen.editable.includes(`${kind.kind}.${key}`);
  const set = (key: string) => (value: string | number) => {
    setValues({ ...values, [key]: value });
    setPlan(null);
  };
  const pickProfile = (value: string) => {
    setProfile(value);
    const next = offered.find(p => p.name === value);
    const part = (next?.body[kind.kind] ?? {}) as Values;
    setValues({ ...defaults(fields), ...part });
    setPlan(null);
  };

  const request = () => requestOf(kind, name, lifetime, values, profile);
  const onPreview = async () => {
    try {
      setPlan(await run(() => previewLaunch(request())));
    } catch (error) {
      await reportError('Could not preview the launch', error);
    }
  };
  const onSubmit = async (event: React.FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const body = request() as unknown as Record<string, never>;
    const model = await run(() => commands.execute(CommandIDs.launch, body));
    if (model) {
      setPlan(null);
    }
  };

  const field = (f: IBatchField) => {
    if (f.type === 'count') {
      return (
        <NumberField
          key={f.key}
          label={f.label}
          min={f.min ?? 0}
          max={f.max ?? 4096}
          disabled={locked(f.key)}
          value={Number(values[f.key])}
          onChange={set(f.key)}
        />
      );
    }
    if (f.type === 'lines') {
      return (
        <label key={f.key} className="eugo-Field">
          <span>{f.label}</span>
          <textarea
            className="jp-mod-styled eugo-Input eugo-mod-lines"
            aria-label={f.label}
            placeholder={f.placeholder}
            disabled={locked(f.key)}
            rows={2}
            value={String(values[f.key] ?? '')}
            onChange={e => set(f.key)(e.currentTarget.value)}
          />
        </label>
      );
    }
    return (
      <React.Fragment key={f.key}>
        <TextField
          label={f.label}
          ariaLabel={f.label}
          placeholder={f.placeholder ?? ''}
          title={f.title}
          disabled={locked(f.key)}
          value={String(values[f.key] ?? '')}
          onChange={set(f.key)}
        />
        {(f.key === 'walltime' || f.key === 'namespace') && kind.hint && (
          <p className="eugo-Hint">{kind.hint}</p>
        )}
      </React.Fragment>
    );
  };

  return (
    <form className={`eugo-Form ${kind.className ?? ''}`} onSubmit={onSubmit}>
      {offered.length > 0 && (
        <label className="eugo-Field">
          <span>Profile</span>
          <select
            className="jp-mod-styled eugo-Input"
            aria-label="Profile"
            value={profile}
            onChange={e => pickProfile(e.currentTarget.value)}
          >
            <option value="">None (fill in below)</option>
            {offered.map(p => (
              <option key={p.name} value={p.name} title={p.description}>
                {p.name}
              </option>
            ))}
          </select>
        </label>
      )}
      <ClusterNameField value={name} onChange={setName} />
      {fields.map(field)}
      <LifetimeField
        value={lifetime}
        onChange={setLifetime}
        group={`eugo-${kind.kind}-lifetime`}
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
