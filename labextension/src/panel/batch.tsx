// A kind's launch form (SLURM, Grid Engine, Kubernetes...), built from the fields the server
// declares for it (`GET /eugo/kinds`): the fields, extra directive lines, an optional profile
// from the server; Preview shows the exact job scripts or manifests.
import { CommandRegistry } from '@lumino/commands';
import * as React from 'react';

import {
  IBatchRequest,
  IFormField,
  IKindForm,
  IPlan,
  IProfile,
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

type Values = Record<string, string | number>;

type Part = Record<string, unknown>;

function defaults(fields: readonly IFormField[]): Values {
  return Object.fromEntries(fields.map(f => [f.key, f.default]));
}

/** A dotted key's value in a body's part (`worker_groups.0.cpus`). */
function valueAt(part: Part, key: string): unknown {
  return key
    .split('.')
    .reduce<unknown>(
      (at, step) => (at as Record<string, unknown> | undefined)?.[step],
      part
    );
}

/** The body's part from the form's values: a dotted key nests (a number step is a list's
 * index); empty optional fields are left out. */
function partOf(values: Values): Part {
  const part: Part = {};
  for (const [key, value] of Object.entries(values)) {
    if (value === '' || value === undefined) {
      continue;
    }
    const steps = key.split('.');
    let at = part as Record<string, unknown>;
    steps.slice(0, -1).forEach((step, i) => {
      const list = /^\d+$/.test(steps[i + 1]);
      at[step] = at[step] ?? (list ? [] : {});
      at = at[step] as Record<string, unknown>;
    });
    at[steps[steps.length - 1]] = value;
  }
  return part;
}

/** The body sent to the server. */
function requestOf(
  kind: string,
  name: string,
  lifetime: Lifetime,
  values: Values,
  profile: string
): IBatchRequest {
  const request: IBatchRequest = {
    kind,
    name: name.trim(),
    lifetime,
    [kind]: partOf(values)
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
  kind: string;
  form: IKindForm;
}

export function BatchForm({
  commands,
  profiles,
  kind,
  form
}: IBatchFormProps): JSX.Element {
  const fields = form.fields;
  // The kind's sentence goes under the wall time, or else under the first field.
  const hintAfter = fields.some(f => f.key === 'walltime')
    ? 'walltime'
    : fields[0]?.key;
  const [name, setName] = React.useState('hpc');
  const [values, setValues] = React.useState<Values>(() => defaults(fields));
  const [lifetime, setLifetime] = React.useState<Lifetime>('server');
  const [profile, setProfile] = React.useState('');
  const [plan, setPlan] = React.useState<IPlan | null>(null);
  const [pending, run] = usePending();

  const offered = profiles.filter(p => (p.kind || p.body.kind) === kind);
  const chosen = offered.find(p => p.name === profile);
  // With a profile, only the fields it lets users change stay editable.
  const locked = (key: string) =>
    !!chosen && !chosen.editable.includes(`${kind}.${key}`);
  const set = (key: string) => (value: string | number) => {
    setValues({ ...values, [key]: value });
    setPlan(null);
  };
  const pickProfile = (value: string) => {
    setProfile(value);
    const next = offered.find(p => p.name === value);
    const part = (next?.body[kind] ?? {}) as Part;
    const given = fields
      .map(f => [f.key, valueAt(part, f.key)])
      .filter(([, value]) => value !== undefined);
    setValues({ ...defaults(fields), ...Object.fromEntries(given) });
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

  const hint = (f: IFormField) =>
    f.key === hintAfter &&
    form.hint && <p className="eugo-Hint">{form.hint}</p>;
  const input = (f: IFormField) => {
    if (f.type === 'count') {
      return (
        <NumberField
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
        <label className="eugo-Field">
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
      <TextField
        label={f.label}
        ariaLabel={f.label}
        placeholder={f.placeholder ?? ''}
        title={f.title}
        disabled={locked(f.key)}
        value={String(values[f.key] ?? '')}
        onChange={set(f.key)}
      />
    );
  };
  const field = (f: IFormField) => (
    <React.Fragment key={f.key}>
      {input(f)}
      {hint(f)}
    </React.Fragment>
  );

  return (
    <form
      className="eugo-Form eugo-BatchForm"
      data-kind={kind}
      onSubmit={onSubmit}
    >
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
        group={`eugo-${kind}-lifetime`}
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
