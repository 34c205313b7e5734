// `koa2` is the npm alias of Koa 2 (a devDependency), typed as Koa: the suites use only
// what both majors share.
declare module 'koa2' {
  import Koa from 'koa';
  export default Koa;
}
