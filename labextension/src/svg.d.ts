// SVG files import as their source text (the JupyterLab builder's asset/source rule).
declare module '*.svg' {
  const value: string;
  export default value;
}
