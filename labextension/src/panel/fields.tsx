// Form pieces every launch and connect form shares: labelled text and number fields, the
// cluster name, the lifetime choice and the submit row, so the forms differ only in what they ask.
import * as React from 'react';

import { Lifetime } from '../api';

// The names the server accepts (it checks them again and answers 400 with the same rule).
const NAME_PATTERN = '[A-Za-z0-9][A-Za-z0-9 ._\\-]{0,63}';
const NAME_TITLE =
  "1 to 64 letters, digits, spaces, '.', '_' or '-', starting with a letter or digit";

interface ITextFieldProps {
  label: string;
  ariaLabel: string;
  value: string;
  onChange: (value: string) => void;
  required?: boolean;
  pattern?: string;
  title?: string;
  placeholder?: string;
  disabled?: boolean;
}

export function TextField(props: ITextFieldProps): JSX.Element {
  return (
    <label className="eugo-Field">
      <span>{props.label}</span>
      <input
        className="jp-mod-styled eugo-Input"
        type="text"
        required={props.required}
        pattern={props.pattern}
        title={props.title}
        placeholder={props.placeholder}
        disabled={props.disabled}
        aria-label={props.ariaLabel}
        value={props.value}
        onChange={e => props.onChange(e.currentTarget.value)}
      />
    </label>
  );
}

interface INumberInputProps {
  ariaLabel: string;
  value: number;
  onChange: (value: number) => void;
  min: number;
  max: number;
  disabled?: boolean;
  /** Whether the form may be sent with the input emptied (default: it may not). */
  required?: boolean;
}

/** A whole number; an emptied input shows empty (its value is NaN until refilled). */
export function NumberInput({
  ariaLabel,
  value,
  onChange,
  min,
  max,
  disabled,
  required = true
}: INumberInputProps): JSX.Element {
  return (
    <input
      className="jp-mod-styled eugo-Input eugo-mod-number"
      type="number"
      min={min}
      max={max}
      step={1}
      required={required}
      disabled={disabled}
      aria-label={ariaLabel}
      value={Number.isNaN(value) ? '' : value}
      onChange={e => onChange(e.currentTarget.valueAsNumber)}
    />
  );
}

interface INumberFieldProps extends Omit<INumberInputProps, 'ariaLabel'> {
  label: string;
}

export function NumberField({
  label,
  ...input
}: INumberFieldProps): JSX.Element {
  return (
    <label className="eugo-Field">
      <span>{label}</span>
      <NumberInput ariaLabel={label} {...input} />
    </label>
  );
}

/** The cluster's name, as every launch form asks it. */
export function ClusterNameField({
  value,
  onChange
}: {
  value: string;
  onChange: (value: string) => void;
}): JSX.Element {
  return (
    <TextField
      label="Name"
      ariaLabel="Cluster name"
      required
      pattern={NAME_PATTERN}
      title={NAME_TITLE}
      value={value}
      onChange={onChange}
    />
  );
}

interface ILifetimeProps {
  value: Lifetime;
  onChange: (value: Lifetime) => void;
  /** Radio groups need a name unique on the page. */
  group: string;
}

export function LifetimeField({
  value,
  onChange,
  group
}: ILifetimeProps): JSX.Element {
  const choices: [Lifetime, string][] = [
    ['server', 'Shut the cluster down with it'],
    ['persistent', 'Keep it running (a restarted server finds it)']
  ];
  return (
    <fieldset className="eugo-Lifetime">
      <legend>When the Jupyter server stops</legend>
      {choices.map(([choice, text]) => (
        <label key={choice}>
          <input
            type="radio"
            name={group}
            value={choice}
            checked={value === choice}
            onChange={() => onChange(choice)}
          />
          {text}
        </label>
      ))}
    </fieldset>
  );
}

interface IActionsProps {
  pending: boolean;
  label: string;
  pendingLabel: string;
  children?: React.ReactNode;
}

/** The submit row: optional extra buttons (Preview) before the accept button. */
export function FormActions({
  pending,
  label,
  pendingLabel,
  children
}: IActionsProps) {
  return (
    <div className="eugo-Form-actions">
      {children}
      <button
        type="submit"
        className="jp-Button jp-mod-styled jp-mod-accept"
        disabled={pending}
      >
        {pending ? pendingLabel : label}
      </button>
    </div>
  );
}

/** Run ``call`` with the form marked pending; returns its result. */
export function usePending(): [
  boolean,
  <T>(call: () => Promise<T>) => Promise<T>
] {
  const [pending, setPending] = React.useState(false);
  const run = async <T,>(call: () => Promise<T>): Promise<T> => {
    setPending(true);
    try {
      return await call();
    } finally {
      setPending(false);
    }
  };
  return [pending, run];
}
